"""A one-sample ``inspect eval`` on the caisson sandbox: Inspect's bash() tool, driven by the
mock model, runs in a caisson session; the scorer reads what the command left there."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer
from inspect_ai.solver import TaskState, generate, use_tools
from inspect_ai.tool import bash
from inspect_ai.util import sandbox

from caisson.integrations.inspect import CaissonSandboxConfig


@scorer(metrics=[accuracy()])
def file_says_hello():  # type: ignore[no-untyped-def]
    async def score(state: TaskState, target: Target) -> Score:
        text = await sandbox().read_file("/workspace/out.txt")
        who = await sandbox().exec(["stat", "-c", "%U", "/workspace/out.txt"])
        return Score(value=CORRECT if text == "hello\n" and who.stdout.strip() == "agent" else INCORRECT, answer=text)

    return score


def test_one_sample_eval_runs_to_completion_in_a_caisson_session(tmp_path: Path) -> None:
    outputs = [
        ModelOutput.for_tool_call(
            model="mockllm/model",
            tool_name="bash",
            tool_arguments={"command": "echo hello > /workspace/out.txt && whoami"},
        ),
        ModelOutput.from_content(model="mockllm/model", content="done"),
    ]
    for output in outputs:  # given, so the mock model does not fetch a tokenizer (no network here)
        output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    model = get_model("mockllm/model", custom_outputs=outputs)
    task = Task(
        dataset=[Sample(input="Write hello into /workspace/out.txt", target="hello")],
        solver=[use_tools(bash(timeout=60)), generate()],
        scorer=file_says_hello(),
        sandbox=("caisson", CaissonSandboxConfig(pool=0)),
    )
    # On a thread of its own: eval() runs its own event loop, and an earlier async test's may
    # still be current on this one.
    with ThreadPoolExecutor(1) as pool:
        [log] = pool.submit(eval, task, model=model, log_dir=str(tmp_path), display="none").result()
    assert log.status == "success", log.error
    assert log.results is not None and log.results.scores[0].metrics["accuracy"].value == 1.0
    assert log.samples is not None
    tool_outputs = [m.text for m in log.samples[0].messages if m.role == "tool"]
    assert tool_outputs == ["agent\n"]
