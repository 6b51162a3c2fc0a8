"""Agent scaling: jobs/s with 1, 2, 4 agent processes x N jobs in flight per process.

    python bench/scaling.py [--procs 1,2,4] [--concurrency 1,8,32] [--rounds 4] [--max-jobs 320] [--runs 3]

Real parts: the embedded Valkey, TuringDB with the test fixture's Reactome subset,
agent processes (`python -m services.agent`, WORKER_CONCURRENCY=N) and, as the LLM,
the scripted OpenAI-compatible server of the tests in its own process, answering
every call after 200 ms with no tool call (one LLM call per job, then the answer).
Jobs (JobTask with a router decision) go straight into the agent inbox, `rounds` x
procs x N at once (at most --max-jobs), and are timed until the last job_done event.
Baselines in the same run: the ideal procs x N / 0.2 s, and the stand-in's own
ceiling, calls/s from one client process with the same number of calls in flight.
Agents are pinned to `--agent-cpu`; Valkey, TuringDB, the stand-in and this driver
to `--infra-cpu`.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import asyncio  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402

from bench.common import ROOT, fixture_subset, graph_settings, pin, table  # noqa: E402
from shared.bus import EVENT_FIELD, Keys, add_task, connect  # noqa: E402
from shared.contracts import JobTask, RouterDecision, decode_event  # noqa: E402

DELAY = 0.2
QUESTION = "How does the PI3K/AKT pathway regulate cell survival?"


async def run_jobs(url: str, keys: Keys, n: int, timeout: float = 60.0) -> float:
    """Push n agent jobs at once; seconds until all n have ended (job_done / job_error)."""
    client = connect(url)
    session = str(uuid.uuid4())
    jobs = {str(uuid.uuid4()) for _ in range(n)}
    last = await client.xrevrange(keys.events, count=1)
    cursor = last[0][0] if last else b"0-0"
    decision = RouterDecision("agent", 0.9, "bench")
    started = time.perf_counter()
    pipe = client.pipeline(transaction=False)
    for job in jobs:
        add_task(pipe, keys, "agent", JobTask(job, session, QUESTION, decision=decision))
    await pipe.execute()
    errors = 0
    deadline = started + timeout
    while jobs:
        reply = await client.xread({keys.events: cursor}, count=1000, block=1000)
        if not reply and time.perf_counter() > deadline:
            raise TimeoutError(f"{len(jobs)} jobs did not end in {timeout:.0f} s")
        if not reply:
            continue
        for entry_id, fields in reply[0][1]:
            cursor = entry_id
            event = decode_event(fields[EVENT_FIELD])
            if event.type in ("job_done", "job_error") and event.job_id in jobs:
                jobs.discard(event.job_id)
                errors += event.type == "job_error"
    elapsed = time.perf_counter() - started
    await client.aclose()
    if errors:
        raise RuntimeError(f"{errors} jobs ended in job_error")
    return elapsed


async def standin_ceiling(llm_url: str, in_flight: int, calls: int) -> float:
    """Chat completions/s against the stand-in with `in_flight` calls at a time."""
    body = {"model": "agent-model", "messages": [{"role": "user", "content": QUESTION}]}
    left = [calls]
    limits = httpx.Limits(max_connections=in_flight, max_keepalive_connections=in_flight)
    async with httpx.AsyncClient(base_url=llm_url, timeout=30, limits=limits) as client:

        async def caller() -> None:
            while left[0] > 0:
                left[0] -= 1
                try:
                    (await client.post("/chat/completions", json=body)).raise_for_status()
                except httpx.HTTPError:  # a dropped keep-alive connection: count the call again
                    left[0] += 1

        started = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(in_flight)))
        return calls / (time.perf_counter() - started)


def start_standin(cpu: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "llm_standin.py"), "--delay", str(DELAY)],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    pin(proc.pid, cpu)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def measure(stack_settings_: object, base: Path, procs: int, conc: int, args: argparse.Namespace) -> list[float]:
    """Start `procs` agents with WORKER_CONCURRENCY=conc; jobs/s of each run."""
    import msgspec

    from tests.fixtures.stack import Stack

    settings = msgspec.structs.replace(stack_settings_, worker_concurrency=conc, key_prefix=f"scale-{uuid.uuid4().hex[:8]}:")
    logs = base / "logs"
    logs.mkdir(exist_ok=True)
    stack = Stack(settings, logs)
    try:
        for _ in range(procs):
            pin(stack.start("agent").process.pid, args.agent_cpu)
        keys = Keys(settings.key_prefix)
        asyncio.run(run_jobs(settings.valkey_url, keys, procs * conc))  # warm-up: every agent up
        n = min(args.max_jobs, max(10, args.rounds * procs * conc))
        return [n / asyncio.run(run_jobs(settings.valkey_url, keys, n)) for _ in range(args.runs)]
    finally:
        stack.stop_all()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--procs", default="1,2,4")
    p.add_argument("--concurrency", default="1,8,32")
    p.add_argument("--rounds", type=int, default=4, help="jobs per run = rounds x procs x concurrency ...")
    p.add_argument("--max-jobs", type=int, default=320, help="... at most this many")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--agent-cpu", default="1")
    p.add_argument("--infra-cpu", default="0")
    args = p.parse_args()
    procs_list = [int(x) for x in args.procs.split(",")]
    conc_list = [int(x) for x in args.concurrency.split(",")]

    from shared.graph.loader import load_graph_async
    from shared.graph.server import TuringDBServer
    from shared.valkey_server import EmbeddedValkey, free_port
    from tests.fixtures.stack import stack_settings

    pin(os.getpid(), args.infra_cpu)
    with tempfile.TemporaryDirectory(prefix="bench-scaling-") as tmp:
        base = Path(tmp)
        valkey = EmbeddedValkey(base / "valkey")
        valkey.start()
        turing = TuringDBServer(base / "turingdb", free_port()).start()
        standin, llm_url = start_standin(args.infra_cpu)
        try:
            pin(valkey.pid, args.infra_cpu)
            pin(turing.process.pid, args.infra_cpu)
            gs = graph_settings(base, turing.port)
            report = asyncio.run(load_graph_async(gs, fixture_subset(base / "subset"), progress=lambda m: None, server=turing))
            print(f"graph: fixture subset, {report.nodes:,} nodes; LLM stand-in {DELAY * 1000:.0f} ms a call")
            settings = stack_settings(gs, valkey.url, llm_url, base / "state", visibility_timeout_seconds=30.0,
                                      log_level="warning", llm_max_retries=0)
            rows = []
            ceilings: dict[int, float] = {}
            for procs in procs_list:
                for conc in conc_list:
                    slots = procs * conc
                    if slots not in ceilings:
                        ceilings[slots] = asyncio.run(standin_ceiling(llm_url, slots, min(args.max_jobs, max(10, args.rounds * slots))))
                    rates = measure(settings, base, procs, conc, args)
                    rate = statistics.median(rates)
                    ideal = slots / DELAY
                    rows.append([str(procs), str(conc), f"{rate:,.1f}", f"{ideal:,.0f}", f"{rate / ideal:.2f}",
                                 f"{ceilings[slots]:,.0f}", f"{rate / ceilings[slots]:.2f}",
                                 ", ".join(f"{r:,.1f}" for r in rates)])
                    print(f"  procs {procs} x concurrency {conc}: {rate:,.1f} jobs/s", flush=True)
        finally:
            standin.terminate()
            standin.wait(10)
            turing.stop()
            valkey.stop()
    print(f"\nagent cpu {args.agent_cpu}, infra cpu {args.infra_cpu}; medians of {args.runs} runs\n")
    print(table(["procs", "jobs in flight / proc", "jobs/s", "ideal (slots/0.2 s)", "efficiency",
                 "stand-in calls/s", "/ stand-in", "per-run jobs/s"], rows))


if __name__ == "__main__":
    main()
