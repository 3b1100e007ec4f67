// What Strata lets UCX use, unless the environment says otherwise (UCX_TLS and UCX_NET_DEVICES,
// when set, win). Network devices: loopback when every rank of the job is on this node, else
// the interface this process reaches the store from, so that a job listens only where its ranks
// are (UCX's TCP transport listens on every device it may use). Transports: all but CMA, whose
// failed read of a peer that died aborts the survivors' UCX, and SysV shared memory, whose
// segments UCX creates with mode 0660 (a group-mate could attach them); POSIX shared memory,
// mode 0600, carries local messages instead; on one node, not TCP either (it would carry the
// local rendezvous, slowly). docs/architecture.md, "What a job listens on".
#pragma once

#include <string>
#include <vector>

namespace strata::ucx {

/// One ucp_config_modify() setting: its name without the UCX_ prefix, and its value.
struct Setting {
  std::string name, value;
};

/// The settings for a job whose ranks are all on this node (`one_node`), or else which reaches
/// its store from `store_address` ("" when unknown: UCX's own device choice stands).
std::vector<Setting> scope(bool one_node, const std::string& store_address);

/// The name of the interface holding IPv4 address `address` ("" when none does).
std::string interface_of(const std::string& address);

}  // namespace strata::ucx
