// strata-topo (first cut): a summary of this node as hwloc sees it: sockets, NUMA nodes, cores,
// memory, and the GPUs and network devices attached. The full device matrix, path classes and the
// job view belong to the topology issue.
#include <hwloc.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace {

int count(hwloc_topology_t t, hwloc_obj_type_t type) {
  return hwloc_get_nbobjs_by_type(t, type);
}

}  // namespace

int main(int argc, char** argv) {
  hwloc_topology_t topo;
  hwloc_topology_init(&topo);
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (argc == 3 && std::string(argv[1]) == "--input") {
    if (hwloc_topology_set_xml(topo, argv[2]) != 0) {
      std::fprintf(stderr, "strata-topo: cannot read hwloc XML %s\n", argv[2]);
      return 1;
    }
  } else if (argc != 1) {
    std::fprintf(stderr, "usage: strata-topo [--input hwloc.xml]\n");
    return 2;
  }
  if (hwloc_topology_load(topo) != 0) {
    std::fprintf(stderr, "strata-topo: hwloc could not load the topology\n");
    return 1;
  }
  char host[256] = "?";
  gethostname(host, sizeof host);
  std::printf("# strata-topo: node %s\n", host);
  std::printf("#   packages %d, NUMA nodes %d, cores %d, hardware threads %d\n",
              count(topo, HWLOC_OBJ_PACKAGE), count(topo, HWLOC_OBJ_NUMANODE),
              count(topo, HWLOC_OBJ_CORE), count(topo, HWLOC_OBJ_PU));
  for (int i = 0; i < count(topo, HWLOC_OBJ_NUMANODE); ++i) {
    hwloc_obj_t n = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, i);
    char cpus[256];
    hwloc_bitmap_list_snprintf(cpus, sizeof cpus, n->cpuset);
    std::printf("#   NUMA %u: %.1f GiB, cpus %s\n", n->os_index,
                double(n->attr->numanode.local_memory) / (1u << 30), cpus);
  }
  int gpus = 0, nics = 0;
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_osdev(topo, o));) {
    auto kind = o->attr->osdev.type;
    if (kind == HWLOC_OBJ_OSDEV_GPU || kind == HWLOC_OBJ_OSDEV_COPROC) {
      ++gpus;
      std::printf("#   GPU %s\n", o->name);
    } else if (kind == HWLOC_OBJ_OSDEV_OPENFABRICS || kind == HWLOC_OBJ_OSDEV_NETWORK) {
      ++nics;
      std::printf("#   NIC %s\n", o->name);
    }
  }
  std::printf("#   GPUs %d, network devices %d\n", gpus, nics);
  hwloc_topology_destroy(topo);
  return 0;
}
