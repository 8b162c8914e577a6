"""The search space: values, defaults, conditional parameters, constraints."""

import optuna
import pytest

from iobo import SpaceError, Workload
from iobo.space import KiB, MiB, Parameter, Space, aggregators_allowed, io_stack_space


@pytest.fixture
def space():
    return io_stack_space()


def test_default_is_the_library_defaults_and_leaves_out_inactive(space):
    default = space.default()
    assert default["alignment_interval"] == 1
    assert default["cb_buffer_size"] == 16 * MiB
    assert default["cb_nodes"] is None and default["striping_factor"] is None
    assert default["layout"] == "contiguous"
    assert "chunk_size" not in default  # only exists for chunked layouts


def test_layers_cover_hdf5_mpiio_lustre(space):
    assert {p.layer for p in space} == {"hdf5", "mpiio", "lustre"}
    assert {"striping_factor", "striping_unit"} == {p.name for p in space.layer("lustre")}


def test_unknown_parameter_is_named_with_the_allowed_names(space):
    with pytest.raises(SpaceError, match=r"unknown parameter\(s\) \['stripe_count'\].*striping_factor"):
        space.validate({"stripe_count": 4})


@pytest.mark.parametrize(
    "name, value, shown",
    [
        ("alignment_interval", 3000, "3000"),  # not a power of two in the set
        ("alignment_interval", "4096", "'4096'"),  # wrong type
        ("coll_metadata", 1, "1"),  # an int is not a bool
        ("romio_cb_write", "on", "'on'"),
    ],
)
def test_value_outside_the_allowed_set_names_parameter_value_and_allowed(space, name, value, shown):
    with pytest.raises(SpaceError) as err:
        space.validate({name: value})
    message = str(err.value)
    assert name in message and shown in message and "allowed:" in message


def test_chunk_size_only_with_chunked_layout(space):
    with pytest.raises(SpaceError, match="chunk_size.*only applies when layout='chunked'"):
        space.validate({"chunk_size": 4 * MiB})
    assert space.validate({"layout": "chunked", "chunk_size": 4 * MiB})["chunk_size"] == 4 * MiB


@pytest.mark.parametrize(
    "values, workload, pattern",
    [
        ({"alignment_threshold": MiB, "alignment_interval": 64 * KiB}, Workload(),
         r"alignment_threshold=1 MiB exceeds alignment_interval=64 KiB; allowed: threshold <= interval"),
        ({"layout": "chunked", "chunk_size": 64 * MiB}, Workload(ranks=2, dataset_bytes=8 * MiB),
         r"chunk_size=64 MiB is larger than the dataset \(8388608 bytes\); allowed: chunk_size <= 8388608"),
        ({"cb_nodes": 8}, Workload(ranks=4), r"cb_nodes=8 exceeds the job's 4 ranks; allowed: 1..4"),
    ],
)
def test_violated_constraints_are_rejected_with_the_rule(space, values, workload, pattern):
    with pytest.raises(SpaceError, match=pattern):
        space.validate(values, workload)


def test_repair_makes_a_proposal_runnable_and_says_what_changed(space):
    workload = Workload(ranks=4, dataset_bytes=8 * MiB)
    proposal = {"alignment_threshold": MiB, "alignment_interval": 64 * KiB, "layout": "chunked",
                "chunk_size": 64 * MiB, "cb_nodes": 16}
    repaired, notes = space.repair(proposal, workload)
    assert len(notes) == 3
    assert repaired["alignment_threshold"] == 64 * KiB
    assert repaired["chunk_size"] == 4 * MiB  # largest allowed <= 8 MiB
    assert repaired["cb_nodes"] == 4
    assert space.violations(repaired, workload) == []


def test_suggest_asks_conditional_parameters_only_when_active(space):
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    seen_chunked = seen_contiguous = False
    for _ in range(30):
        trial = study.ask()
        values, _ = space.suggest(trial, Workload(ranks=2, dataset_bytes=64 * MiB))
        if values["layout"] == "chunked":
            seen_chunked = True
            assert "chunk_size" in trial.params
        else:
            seen_contiguous = True
            assert "chunk_size" not in trial.params
        study.tell(trial, 1.0)
    assert seen_chunked and seen_contiguous


def test_parameter_definitions_are_checked():
    with pytest.raises(SpaceError, match="default 3 is not among its values"):
        Parameter("x", "hdf5", (1, 2), 3)
    with pytest.raises(SpaceError, match="layer must be one of"):
        Parameter("x", "posix", (1, 2), 1)
    with pytest.raises(SpaceError, match="lists a value twice"):
        Parameter("x", "hdf5", (1, 1), 1)
    p = Parameter("x", "hdf5", (1, 2), 1)
    with pytest.raises(SpaceError, match="repeated"):
        Space((p, p))
    with pytest.raises(SpaceError, match="depends on 'layout'"):
        Space((Parameter("c", "hdf5", (1, 2), 1, active_if=("layout", "chunked")),))


def test_workload_is_checked():
    with pytest.raises(SpaceError, match="ranks must be a positive integer; got 0"):
        Workload(ranks=0)
    with pytest.raises(SpaceError, match="nodes"):
        Workload(ranks=2, nodes=4)


def test_size_counts_conditional_values(space):
    small = space.select(["layout", "chunk_size", "transfer_mode"])
    # contiguous x 2 transfer modes + chunked x 6 chunk sizes x 2 transfer modes
    assert small.size() == 2 + 6 * 2
    assert space.size() > 10**8


@pytest.mark.parametrize("config_list, ranks, nodes, allowed", [
    ("*:1", 2, 1, 1),  # ROMIO's default, one host: one aggregator (what MEASURED.md saw here)
    ("*:1", 3, 3, 3),  # one per host (the test cluster read back cb_nodes 3, aggregators 0 1 2)
    ("*:1", 3, 2, 2),
    ("*:2", 3, 2, 3),  # 2 ranks on one host, 1 on the other: 2 + 1
    ("*:4", 8, 2, 8),
    ("*:4", 16, 2, 8),
    ("*:*", 6, 3, 6),  # every rank may aggregate
])
def test_the_aggregators_cb_config_list_allows_on_the_jobs_hosts(config_list, ranks, nodes, allowed):
    assert aggregators_allowed(config_list, ranks, nodes) == allowed


def test_cb_nodes_above_what_cb_config_list_allows_on_the_hosts_is_refused_and_repaired(space):
    one_host = Workload(ranks=4, nodes=1)
    with pytest.raises(SpaceError, match=r"cb_nodes=4 exceeds the 1 aggregator\(s\) cb_config_list='\*:1' allows for "
                                         r"4 ranks on 1 node\(s\) \(ROMIO would lower it to 1\); allowed: cb_nodes "
                                         r"<= 1, or a cb_config_list with more aggregators per node \('\*:\*': up to 4\)"):
        space.validate({"cb_nodes": 4}, one_host)
    assert space.validate({"cb_nodes": 4, "cb_config_list": "*:*"}, one_host)["cb_nodes"] == 4
    repaired, notes = space.repair({"cb_nodes": 4, "cb_config_list": "*:2"}, one_host)
    assert repaired["cb_nodes"] == 2 and len(notes) == 1
    three_hosts = Workload(ranks=6, nodes=3)
    assert space.violations({"cb_nodes": 2}, three_hosts) == []  # 3 hosts: up to 3 under *:1
    assert space.repair({"cb_nodes": 4}, three_hosts)[0]["cb_nodes"] == 2  # the largest power of 2 <= 3
    # not known (a kernel process, a decorated task's default workload): nothing is refused for the hosts
    assert space.violations({"cb_nodes": 4}, Workload(ranks=4)) == []


def test_a_workload_spans_at_most_its_ranks_nodes():
    with pytest.raises(SpaceError, match=r"workload nodes \(3\) must not exceed ranks \(2\)"):
        Workload(ranks=2, nodes=3)
    with pytest.raises(SpaceError, match=r"workload nodes must be a positive integer; got 0"):
        Workload(ranks=2, nodes=0)
