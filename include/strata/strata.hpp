// Umbrella header: everything a trainer needs to link Strata.
#pragma once

#include "strata/communicator.hpp"
#include "strata/cost.hpp"
#include "strata/diloco.hpp"
#include "strata/error.hpp"
#include "strata/mesh.hpp"
#include "strata/sharding.hpp"
#include "strata/store.hpp"
#include "strata/topology.hpp"
#include "strata/types.hpp"
#include "strata/version.hpp"
#include "strata/work.hpp"
