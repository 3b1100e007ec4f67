# Multi-node tests on an emulated cluster (tools/strata-cluster, docs/cluster.md): every node a
# network namespace with its own hostname, joined by veth links, UCX on TCP between them.
# strata-cluster exits 77 where it cannot make namespaces (not root, no unshare): reported as
# skipped. Its own --timeout is below CTest's so that it, not CTest, kills a hung run and still
# removes its namespaces. Topology.* and Mesh.* expect node ids emu<i> and read
# STRATA_TEST_RANKS_PER_NODE.
set(STRATA_CLUSTER ${PROJECT_SOURCE_DIR}/tools/strata-cluster)
set(STRATA_CLUSTER_FILTER
    "--gtest_filter=Topology.*:Mesh.*:Collectives.*:Split.*:PointToPoint.*:Deadlines.*:Mismatch.AllToAllv*")

# name, strata-cluster layout, ranks per node for the tests, extra options.
function(strata_cluster_test name layout per_node)
  add_test(NAME ${name}
    COMMAND ${STRATA_CLUSTER} ${layout} --node-prefix emu --timeout 560 ${ARGN}
            -- $<TARGET_FILE:strata_mp_tests> ${STRATA_CLUSTER_FILTER})
  set_tests_properties(${name} PROPERTIES
    TIMEOUT 600 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE
    ENVIRONMENT "STRATA_TIMEOUT=120;STRATA_TEST_RANKS_PER_NODE=${per_node}")
endfunction()

# World size 4: two nodes of two ranks on one veth pair.
strata_cluster_test(cluster_2x2 "--nodes;2;--ranks-per-node;2" 2)
# World size 6, uneven: ranks 0-3 on emu0, 4-5 on emu1.
strata_cluster_test(cluster_4_2 "--ranks;4,2" 4)
# Three single-rank nodes through the switch namespace's bridge, shaped to 1 Gbit/s.
strata_cluster_test(cluster_3x1_switch_1gbit "--nodes;3;--ranks-per-node;1;--rate;1gbit" 1)

# strata-perf checks its own results (-c 1) across the shaped link: hierarchical all-reduce.
add_test(NAME cluster_perf_all_reduce_2x2_1gbit
  COMMAND ${STRATA_CLUSTER} --nodes 2 --ranks-per-node 2 --rate 1gbit --timeout 280
          -- $<TARGET_FILE:strata-perf> all_reduce -b 8 -e 4M -f 8 -n 1 -w 1 -c 1)
set_tests_properties(cluster_perf_all_reduce_2x2_1gbit PROPERTIES
  TIMEOUT 300 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE ENVIRONMENT "STRATA_TIMEOUT=120")

# A clean exit says nothing: 2 x 4 ranks over TCP, where closing endpoints with a flush towards
# ranks already gone printed UCX "error during flush" lines (src/transport/ucx/worker_close.cpp;
# in 7 of 8 such runs before it), three runs.
add_test(NAME cluster_quiet_exit_2x4
  COMMAND sh -c "for i in 1 2 3; do $0 --nodes 2 --ranks-per-node 4 --timeout 90 -- $1 all_reduce \
                   -b 8 -e 1M -f 32 -n 2 -w 1 -c 1 || exit $?; done"
          ${STRATA_CLUSTER} $<TARGET_FILE:strata-perf>)
set_tests_properties(cluster_quiet_exit_2x4 PROPERTIES
  TIMEOUT 300 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE ENVIRONMENT "STRATA_TIMEOUT=120"
  FAIL_REGULAR_EXPRESSION "UCX +(ERROR|WARN)")

# Two sites joined by a wide-area link of 100 Mbit/s and 25 ms per uplink (netem, or the
# userspace delay line where the kernel has none): a TCP round trip takes 4 x 25 ms, and
# strata-perf's all-reduce, its results checked, crosses it.
add_test(NAME cluster_sites_wan_rtt
  COMMAND ${STRATA_CLUSTER} --nodes 2 --sites 2 --ranks-per-node 1 --wan-rate 100mbit
          --wan-delay 25ms --timeout 100 -- python3 ${PROJECT_SOURCE_DIR}/tests/cluster_rtt_check.py 100)
add_test(NAME cluster_sites_wan_perf
  COMMAND ${STRATA_CLUSTER} --nodes 2 --sites 2 --ranks-per-node 2 --wan-rate 100mbit
          --wan-delay 25ms --timeout 280
          -- $<TARGET_FILE:strata-perf> all_reduce -b 8 -e 1M -f 32 -n 1 -w 1 -c 1)
set_tests_properties(cluster_sites_wan_rtt cluster_sites_wan_perf PROPERTIES
  TIMEOUT 300 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE ENVIRONMENT "STRATA_TIMEOUT=120")
