// What the certification report says of the cluster and the run around the layouts: the nodes
// (CPU, cores), the link classes between ranks with a measured rate each, the kernel, the
// libraries and the environment that change behaviour.
#pragma once

#include "strata/communicator.hpp"
#include "strata/topology.hpp"
#include "validate/report.hpp"

namespace gpt {

/// Fills rep.nodes and rep.links (one per class and estimate, with an example pair) from `job`.
void describe_inventory(const strata::JobTopology& job, Report& rep);

/// Collective over `world`: the example pair of each of rep.links exchanges `bytes` each way
/// (the fastest of a few rounds) and rep.links[i].measured_gbs gets the one-direction rate, on
/// every rank.
void measure_links(strata::Communicator& world, Report& rep, size_t bytes = 4u << 20);

/// This process's kernel, the libraries the run uses (Strata's, OpenBLAS) and the environment
/// variables that change Strata's, UCX's, BLAS's or OpenMP's behaviour (values of secrets
/// withheld).
void describe_software(Report& rep);

}  // namespace gpt
