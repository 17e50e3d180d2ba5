"""A scripted mini-swe-agent episode on caisson: its DefaultAgent and deterministic test
model, with the caisson environment in place of docker exec."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from minisweagent.agents.default import DefaultAgent
from minisweagent.environments import get_environment
from minisweagent.models.test_models import DeterministicModel, make_output

from caisson.integrations.mini_swe_agent import CaissonEnvironment

AGENT = {"system_template": "You run commands.", "instance_template": "{{task}} on {{system}} {{machine}}", "step_limit": 10, "cost_limit": 0}


def episode(n: int) -> dict[str, object]:
    env = get_environment({"environment_class": "runtime.integrations.mini_swe_agent.CaissonEnvironment", "cwd": "/workspace"})
    assert isinstance(env, CaissonEnvironment)
    try:
        model = DeterministicModel(
            outputs=[
                make_output("write", [{"command": f"mkdir -p repo && cd repo && echo fix-{n} > patch.txt && whoami"}]),
                make_output("fail", [{"command": "ls /no/such/dir"}]),
                make_output("slow", [{"command": "sleep 5"}]),
                make_output("submit", [{"command": f"echo {'COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT'}; cat repo/patch.txt"}]),
            ]
        )
        env.config.timeout = 2
        agent = DefaultAgent(model, env, **AGENT)
        result = agent.run(f"fix issue {n}")
        observations = [m["content"] for m in agent.messages if m["role"] == "user"][1:]
        return {"result": result, "observations": observations, "prompt": agent.messages[1]["content"]}
    finally:
        env.cleanup()


def test_a_scripted_episode_submits_what_it_wrote_in_the_sandbox() -> None:
    run = episode(1)
    assert run["result"] == {"exit_status": "Submitted", "submission": "fix-1\n"}
    first, failed, slow = run["observations"]  # type: ignore[misc]
    assert "<returncode>0</returncode>" in first and "agent" in first
    assert "<returncode>2</returncode>" in failed and "No such file or directory" in failed  # stderr interleaved
    assert "<returncode>-1</returncode>" in slow and "timed out after 2 seconds" in slow
    assert run["prompt"] == "fix issue 1 on Linux x86_64"


def test_parallel_episodes_are_isolated() -> None:
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(episode, range(4)))
    assert [r["result"] for r in runs] == [{"exit_status": "Submitted", "submission": f"fix-{n}\n"} for n in range(4)]
