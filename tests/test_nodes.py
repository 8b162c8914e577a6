"""Per-node figures of a run (iobo.nodes): the hosts from a kernel's or the shim's report, the aggregators from
ROMIO's read-back ``romio_aggregator_list``."""

from iobo.nodes import NodeShare, describe_nodes, node_shares

SHIM_RUN = {  # what the shim reported of a 4-rank run on 3 hosts, ROMIO aggregating on ranks 0 and 1
    "io": {"hosts": {"node1": {"ranks": [0, 3], "bytes_written": 2_000_000, "bytes_read": 0},
                     "node2": {"ranks": [1], "bytes_written": 1_000_000, "bytes_read": 500_000},
                     "node3": {"ranks": [2], "bytes_written": 1_000_000, "bytes_read": 0}}},
    "hints": {"romio_aggregator_list": "0 1 ", "cb_nodes": "2"},
}


def test_the_shims_hosts_give_each_nodes_ranks_bytes_and_aggregators():
    assert node_shares(SHIM_RUN) == [NodeShare("node1", (0, 3), 2_000_000, 0, (0,)),
                                     NodeShare("node2", (1,), 1_000_000, 500_000, (1,)),
                                     NodeShare("node3", (2,), 1_000_000, 0, ())]
    assert describe_nodes(SHIM_RUN) == ("3 hosts: node1 ranks 0 3 (wrote 2.0 MB, aggregator 0); node2 rank 1 "
                                        "(wrote 1.0 MB, read 0.5 MB, aggregator 1); node3 rank 2 (wrote 1.0 MB); "
                                        "no aggregator on node3")


def test_a_kernels_hosts_give_ranks_only_and_one_host_says_nothing():
    assert describe_nodes({"hosts": {"b": [1], "a": [0]}}) == "2 hosts: a rank 0; b rank 1"
    assert describe_nodes({"hosts": {"a": [0, 1]}}) is None
    assert describe_nodes({}) is None and node_shares({"io": {}}) == []
