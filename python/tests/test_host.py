"""The host on its own: torch's real agents, driven by a small stand-in for the simulator.

Run with the Python that has torch: `PYTHON -m pytest python/tests`.
"""

import sys

import pytest

from fake_world import FakeWorld


def kinds(world, node):
    return [event["kind"] for _, n, event in world.events if n == node]


def test_three_real_agents_form_a_round_train_and_close_it():
    world = FakeWorld(sys.executable, nodes=3).run()
    completed = [e for _, _, e in world.events if e["kind"] == "rendezvous_completed"]
    assert sorted(e["rank"] for e in completed) == [0, 1, 2]
    assert {tuple(e["participants"]) for e in completed} == {("node-0", "node-1", "node-2")}
    for node in range(3):
        states = [e["state"] for _, n, e in world.events if n == node and e["kind"] == "worker_group_state"]
        assert states == ["INIT", "HEALTHY", "SUCCEEDED"]
    assert [k for k in (e["kind"] for _, _, e in world.events) if k == "rendezvous_closed"] == ["rendezvous_closed"]
    main_exits = [exit for (node, fiber), exit in world.exits.items()]
    assert all(exit.get("ok") for exit in main_exits), main_exits


def test_workers_get_torchs_environment():
    world = FakeWorld(sys.executable, nodes=2).run()
    started = [e["envs"][0] for _, _, e in world.events if e["kind"] == "workers_started"]
    assert sorted(env["RANK"] for env in started) == ["0", "1"]
    assert {env["WORLD_SIZE"] for env in started} == {"2"}
    assert {env["MASTER_ADDR"] for env in started} == {"node-0"}


def test_the_same_world_gives_the_same_run():
    first = FakeWorld(sys.executable, nodes=3).run()
    second = FakeWorld(sys.executable, nodes=3).run()
    assert first.events == second.events


def test_too_few_nodes_time_out_in_torchs_own_words():
    world = FakeWorld(sys.executable, nodes=1, time_limit_s=400.0)
    world.argv_min_nodes = 2
    world.run()
    failed = [e for _, _, e in world.events if e["kind"] == "rendezvous_failed"]
    assert failed and failed[0]["error"] == "timeout", world.events


def test_a_broken_command_is_reported_not_hidden():
    world = FakeWorld(sys.executable, nodes=1)
    assert "hello" in world.ask({"cmd": "hello"})
    answer = world.ask({"cmd": "resume", "fiber": 999, "reply": {}})
    assert "host_error" in answer
    world.proc.stdin.close()
    world.proc.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
