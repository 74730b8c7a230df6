from __future__ import annotations

import argparse
import sys

from ..cost.alternatives import PlanAlternative, find_alternatives
from ..errors import Issue, SpecError
from ..plan.changes import version_of
from ..plan.types import (Decision, FleetPlan, LengthsPlan, NodeGroupPlan, NodeResourcesPlan, TrafficPlan, TritonModelPlan,
                          TritonServerPlan,
                          VllmModelPlan)
from ..render.fleet import plan_document, to_json
from . import add_project_arguments, print_warnings, project_from
from .lock import repack_saving, write_stack_lock

NAME = "plan"
# Cheaper alternatives re-plan each model several times (about 50 ms a model here): named for every model of a
# fleet up to this size; beyond it, for the models --model names (a 1,000-model plan stays seconds).
ALTERNATIVES_FOR_UP_TO = 100
HELP = "show what one stack needs: node groups, Triton servers, vLLM layouts, and why"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_project_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the whole plan as JSON")
    parser.add_argument("--model", action="append", default=None, metavar="NAME",
                        help="show only this model, with its node group and Triton server (repeatable)")
    parser.add_argument("--write-lock", action="store_true",
                        help="record the plan's placement in modelfleet.lock.yaml beside models.yaml (atomically)")
    parser.add_argument("--repack", action="store_true",
                        help="ignore the placement lock: the globally optimal placement, and its monthly saving "
                             "against the locked one (with --write-lock: accept it)")


def run(args: argparse.Namespace) -> int:
    project = project_from(args)
    source = project.fleet_source()
    plan, cost = project.plan_and_cost(args.stack, locked=not args.repack, source=source)
    if args.repack:
        print(repack_line(project, args.stack, cost, source), file=sys.stderr)
    names = _selected(plan, args.model)
    alternatives = ()
    if names is not None or len(plan.models) <= ALTERNATIVES_FOR_UP_TO:
        alternatives = find_alternatives(source[0], project.environment(args.stack), project.catalogue(), names,
                                         workers=project.workers)
    else:
        print(f"note: cheaper alternatives are named for fleets of up to {ALTERNATIVES_FOR_UP_TO} models; "
              f"`plan --model NAME` names a model's", file=sys.stderr)
    if names is not None:
        plan = only_models(plan, names)
    if args.json:
        doc = plan_document(plan, cost)
        doc["alternatives"] = [a.model_dump(mode="json") for a in alternatives]
        sys.stdout.write(to_json(doc).decode())
    else:
        sys.stdout.write(format_plan(plan, alternatives))
    print_warnings(plan)
    if args.write_lock:
        full, _ = (plan, cost) if names is None else project.plan_and_cost(args.stack, locked=not args.repack,
                                                                           source=source)
        print(f"wrote {write_stack_lock(project, args.stack, full, source[0])}", file=sys.stderr)
    return 0


def repack_line(project, stack: str, optimal, source=None) -> str:
    """What the global optimum saves against the locked placement, a month at desired replicas (``source``:
    models.yaml as already loaded)."""
    if project.lock(stack) is None:
        return f"repack: {stack} has no placement lock: this plan is the global optimum already"
    _, locked = project.plan_and_cost(stack, source=source)
    figures = repack_saving(locked, optimal)
    if figures is None:
        return "repack: a price is unknown, so the saving is not priced"
    before, after, saving = figures
    accept = f"accept it in its own pull request: modelfleet plan --stack {stack} --repack --write-lock"
    if abs(saving) < 0.005:
        return f"repack: locked {before:,.2f} USD/month, re-solved the same: the locked placement costs what the optimum does"
    if saving < 0:
        return (f"repack: locked {before:,.2f} -> re-solved {after:,.2f} USD/month: re-solving saves nothing "
                f"({-saving:,.2f} more); keep the lock")
    return (f"repack: locked {before:,.2f} -> re-solved {after:,.2f} USD/month: saves {saving:,.2f} "
            f"({100 * saving / before:.1f}%); {accept}")


def _selected(plan: FleetPlan, asked: list[str] | None) -> tuple[str, ...] | None:
    if not asked:
        return None
    known = {m.name for m in plan.models}
    missing = [n for n in asked if n not in known]
    if missing:
        raise SpecError([Issue("", 0, 0, "--model", f"no model named {n!r} in {plan.environment}",
                               f"use one of: {', '.join(sorted(known))}") for n in missing])
    return tuple(dict.fromkeys(asked))


def only_models(plan: FleetPlan, names: tuple[str, ...]) -> FleetPlan:
    """The plan cut to ``names``: those models, the Triton servers that hold them, the node groups they run on,
    the pipelines made of them alone, and their warnings (a server or group also lists what else it holds)."""
    models = tuple(m for m in plan.models if m.name in names)
    servers = tuple(s for s in plan.triton_servers if set(s.models) & set(names))
    groups = {m.node_group for m in models} | {s.node_group for s in servers}
    return plan.model_copy(update={
        "models": models, "triton_servers": servers,
        "node_groups": tuple(g for g in plan.node_groups if g.name in groups),
        "pipelines": tuple(p for p in plan.pipelines if {s.model for s in p.steps if s.model not in {
            x.name for x in p.llm_steps}} | {x.llm for x in p.llm_steps} <= set(names)),
        "warnings": tuple(w for w in plan.warnings if w.model in names)})


def format_plan(plan: FleetPlan, alternatives: tuple[PlanAlternative, ...] = ()) -> str:
    lines = [f"environment {plan.environment} ({plan.region}, {plan.capacity_type}; prices as of "
             f"{plan.catalogue_as_of})", "", "node groups:"]
    for g in plan.node_groups:
        hardware = f"{g.gpus_per_node} x {g.gpu_model:16}" if g.device == "gpu" else f"{g.vcpu:>2} vCPU, no GPU  "
        lines.append(f"  {g.name:28} {g.instance_type:14} {hardware} "
                     f"min {g.min_size} / desired {g.desired_size} / max {g.max_size}   {', '.join(g.workloads)}")
        lines += _node_lines(g)
    lines += ["", "triton servers:"]
    explained: set[str] = set()  # servers packed together share one decision: shown once, under the first
    for s in plan.triton_servers:
        kind = "  KIND_CPU" if s.device == "cpu" else ""
        lines.append(f"  {s.name:28} {s.instance_type:14} replicas {s.min_replicas}-{s.replicas}-{s.max_replicas}"
                     f"  cache {s.cache_size_bytes // 1024**2} MiB{kind}  models: {', '.join(s.models)}")
        lines.append(f"    rollout: {s.rollout.reason}")
        lines += [f"    {t}" for t in (cold_start_text(s), base_text(s)) if t]
        if s.former_names:  # a stack deployed before keeps this server's resources under it (Pulumi aliases)
            kept = (f"; deployed as {s.kube_name} (deploy.formerServerNames): its Kubernetes objects and S3 keys "
                    f"keep that name, labelled modelfleet.io/server={s.name}") if s.kube_name != s.name else ""
            lines.append(f"    formerly named {', '.join(s.former_names)}{kept}")
        if s.decision.reason not in explained:
            explained.add(s.decision.reason)
            lines += _decision_lines(s.decision, "    ")
        if s.rate_limiter is not None:
            lines.append(f"    {s.rate_limiter.choice}: {s.rate_limiter.reason}")
        if s.session_affinity is not None:
            lines.append(f"    {s.session_affinity.decision.choice}: {s.session_affinity.decision.reason}")
    if plan.pipelines:
        lines += ["", "pipelines (Triton ensembles):"]
    for p in plan.pipelines:
        lines.append(f"  {p.name} [on {p.server}] {' -> '.join(s.model for s in p.steps)}, p99 {p.p99_latency_ms:g} ms, "
                     f"{p.peak_rps:g} req/s at peak (on top of each step's own)")
        for d in p.decisions:
            lines += _decision_lines(d, "      ")
    lines += ["", "models:"]
    for m in plan.models:
        lines += _model_lines(m)
        lines += alternative_lines([a for a in alternatives if a.model == m.name], "      ")
    return "\n".join(lines) + "\n"


def alternative_lines(alternatives: list[PlanAlternative], indent: str) -> list[str]:
    """What would make the model cheaper, each with its saving (the model planned alone both ways)."""
    return [f"{indent}cheaper: {a.change}: saves {a.monthly_saving_usd:,.2f} USD/month (planned alone: "
            f"{a.baseline_monthly_usd:,.2f} -> {a.monthly_usd:,.2f}); {a.result}; {a.note}" for a in alternatives]


def _resources(r: NodeResourcesPlan) -> str:
    return (f"{r.cpu:g} CPU, {r.memory_gib:,.2f} GiB, {r.ephemeral_storage_gib:,.1f} GiB disk, {r.gpus} GPU, "
            f"{r.pods} pods")


def _node_lines(g: NodeGroupPlan) -> list[str]:
    """Zones, disks and the fit per node: what the kubelet offers, what the busiest node asks at max + surge."""
    zones = ", ".join(f"{z.zone} {z.min_size}/{z.desired_size}/{z.max_size}" for z in g.zonal) or ", ".join(g.zones)
    disk = (f"pods write to the instance store ({g.instance_store_gib:,} GiB)" if g.ephemeral_storage_on == "instance-store"
            else "pods write to the root volume")
    return [f"    zones: {zones}; {disk}, root volume {g.root_volume_gib} GiB",
            f"    per node: allocatable {_resources(g.allocatable)}; busiest node at max + surge, DaemonSet allowance included, {_resources(g.requested)}",
            *capacity_lines(g)]


def capacity_lines(g: NodeGroupPlan) -> list[str]:
    """A Karpenter pool's types and capacity types, the on-demand base, reservations (none for a managed group
    of one capacity type: its line above says it all)."""
    lines = []
    if g.provisioner == "karpenter":
        lines.append(f"    Karpenter NodePool: {', '.join(g.allowed_types)} (cost order, each fit-checked) on "
                     f"{' then '.join(g.capacity_types)}")
    if g.on_demand_base_nodes:
        lines.append(f"    on-demand base: {g.on_demand_base_nodes} node(s) hold the availability floors spot cannot carry")
    for r in g.reservations:
        ends = f", ends {r.ends}" if r.ends else ""
        lines.append(f"    reservation {r.id} ({r.kind}, {r.count} x {r.instance_type} in {r.zone}{ends}): used first")
    if g.reservations:
        lines.append(f"    {g.reserved_nodes} of its {g.desired_size} node(s) at desired are reserved")
    return lines


def base_text(workload: TritonServerPlan | VllmModelPlan) -> str | None:
    n = workload.on_demand_base_replicas
    return None if not n else f"on spot: {n} replica(s) of its availability floor on on-demand nodes, the rest on spot"


def cold_start_text(workload: TritonServerPlan | VllmModelPlan) -> str | None:
    """A scale-to-zero workload's cold start, step by step (None: it never idles at zero)."""
    c = workload.cold_start
    if c is None:
        return None
    return (f"scales to zero; a cold start takes {c.total_s} s: node launch {c.node_launch_s} s, image "
            f"{c.image_pull_s} s, weights {c.weights_s} s, engine start {c.engine_start_s} s, then the first request "
            f"{c.first_request_ms:,.0f} ms")


def _model_lines(m: TritonModelPlan | VllmModelPlan) -> list[str]:
    if isinstance(m, TritonModelPlan):
        head = (f"  {m.name} [triton on {m.server}, {m.instance_type} x{m.replicas}] batch {m.max_batch_size}, "
                f"window {m.max_queue_delay_us} us, {_queueing(m)}, cache {'on' if m.response_cache else 'off'}, "
                + (f"{m.instance_count} CPU instance(s)" if m.device == "cpu" else gpu_amount(m.gpu_share)))
    else:
        head = (f"  {m.name} [{m.serving} on {m.instance_type}, tp={m.tensor_parallel_size} "
                f"pp={m.pipeline_parallel_size}, {m.replicas} replica(s) x {m.nodes_per_replica} node(s)] "
                f"max_num_seqs {m.max_num_seqs}, max_num_batched_tokens {m.max_num_batched_tokens}, max_model_len "
                f"{m.max_model_len}, KV {m.kv_cache_gib:.0f} GiB" + (", expert parallel" if m.expert_parallel else "")
                + (f", LoRA {', '.join(m.lora_adapters)}" if m.lora_adapters else ""))
    out = [head, f"      serves {version_of(m)}"]
    if isinstance(m, VllmModelPlan) and m.estimates is not None:
        out.append(f"      estimates: {llm_estimates_text(m)}")
    if isinstance(m, VllmModelPlan) and m.weights is not None:
        out.append(f"      weights: {weights_text(m)}")
    if isinstance(m, TritonModelPlan):
        out.append(f"      speed: a full batch {m.compute_ms:g} ms, {m.rps_per_instance:g} req/s per instance; "
                   f"{m.speed_basis}")
    if isinstance(m, VllmModelPlan) and m.measured is not None:
        out.append(_measured_line(m))
    if isinstance(m, VllmModelPlan) and m.rollout is not None:
        out.append(f"      rollout: {m.rollout.reason}")
    if isinstance(m, VllmModelPlan):
        out += [f"      {t}" for t in (cold_start_text(m), base_text(m)) if t]
    for d in m.decisions:
        out += _decision_lines(d, "      ")
    return out


def llm_estimates_text(m: VllmModelPlan) -> str:
    """One line of an LLM's predicted speed at peak, and what the figures rest on."""
    e = m.estimates
    assert e is not None
    if e.traffic is None:
        return (f"{e.input_tokens:,} in / {e.output_tokens:,} out: prefill {e.prefill_ms:,.0f} ms, p99 TTFT "
                f"{e.ttft_p99_ms:,.0f} ms, TPOT {e.tpot_ms:.1f} ms at {e.sequences_per_replica} sequence(s) per replica "
                f"({e.tpot_at_max_num_seqs_ms:.1f} ms at max_num_seqs), {e.output_tokens_per_s_per_replica:,.0f} "
                f"tokens/s per replica; binding: {m.binding_constraint}; source: {e.source}")
    return (f"{e.simulated_requests:,} simulated requests of {traffic_text(e.traffic)}: TTFT p50 {e.ttft_p50_ms:,.0f} / p99 {e.ttft_p99_ms:,.0f} ms (95% bound "
            f"{e.ttft_p99_bound_ms:,.0f}), TPOT p50 {e.tpot_p50_ms:.1f} / p99 {e.tpot_p99_ms:.1f} ms (bound "
            f"{e.tpot_p99_bound_ms:.1f}), ITL p99 {e.itl_p99_ms:,.1f} ms; prefill {e.prefill_ms:,.0f} ms alone; closed "
            f"form's p99 TTFT was {e.closed_form_ttft_p99_ms:,.0f} ms; {e.output_tokens_per_s_per_replica:,.0f} tokens/s "
            f"per replica; binding: {m.binding_constraint}; source: {e.source}, {e.simulations} simulation(s)")


def traffic_text(t: TrafficPlan) -> str:
    """The simulated traffic in words: arrivals per replica and the lengths."""
    if t.arrivals == "closed":
        think = f", think {t.think_time_s:g} s" if t.think_time_s else ""
        arrivals = f"closed loop, {t.users_per_replica:g} users per replica{think}"
    else:
        burst = f" (cv {t.cv:g})" if t.cv is not None else ""
        arrivals = f"{t.arrivals}{burst} {t.requests_per_s_per_replica:g} req/s per replica"
    return f"{arrivals}; prompts {_lengths_text(t.input)}, answers {_lengths_text(t.output)}"


def _lengths_text(lengths: LengthsPlan) -> str:
    if lengths.trace is not None:
        return f"from {lengths.trace}"
    if lengths.distribution == "fixed":
        return f"{lengths.mean:,.0f}"
    return f"{lengths.distribution} mean {lengths.mean:,.0f} p99 {lengths.p99:,.0f}"


def weights_text(m: VllmModelPlan) -> str:
    """Where a cold start reads the checkpoint from, how much each pod and GPU reads, and why."""
    w = m.weights
    assert w is not None
    where = {"s3": "streamed from S3", "staged": "staged to S3 once, streamed", "hub": "downloaded by every pod"}
    per_rank = f", {w.rank_read_gib:,.1f} GiB per GPU" if m.gpus_per_pod > 1 or w.source == "hub" else ""
    return (f"{where[w.source]}: a cold start reads {w.pod_read_gib:,.1f} GiB per pod{per_rank}"
            + (f" (the Job copies {w.stage_gib:,.1f} GiB from the Hub once per revision)" if w.source == "staged" else "")
            + f"; {w.reason}")


def _measured_line(m: VllmModelPlan) -> str:
    p = m.measured
    return (f"      measured ({p.measured_on} tp={p.tensor_parallel}, {p.measured_at}; {p.concurrency} sequences, "
            f"{p.input_tokens} in / {p.output_tokens} out): TTFT median {p.ttft_median_ms:g} / p99 {p.ttft_p99_ms:g} ms, "
            f"TPOT median {p.tpot_median_ms:g} / p99 {p.tpot_p99_ms:g} ms, {p.output_tokens_per_s:g} tokens/s; "
            f"{p.verdict}")


def gpu_amount(share: float) -> str:
    """How much GPU a model's instances hold: a fraction of one, or several (``gpu_share`` 3.57 is 3.6 GPUs)."""
    if share >= 1:
        return "1 GPU" if round(share, 1) == 1 else f"{share:.1f} GPUs"
    return f"{share:.1%} of a GPU" if share < 0.01 else f"{share:.0%} of a GPU"


def _queueing(m: TritonModelPlan) -> str:
    if m.sequence is not None:
        return (f"sequence batcher ({m.sequence.strategy}, {m.sequence.slots} slots, idle release after "
                f"{m.sequence.idle_timeout_us // 1000} ms)")
    levels = "".join(f", {lv.name} {lv.queue_timeout_us} us" for lv in m.priority_levels)
    return (f"queue timeout {m.queue_timeout_us} us (REJECT{levels}), queue <= {m.max_queue_size}"
            + (", streaming" if m.decoupled else ""))


def _decision_lines(decision: Decision, indent: str, shown: int = 4) -> list[str]:
    """The reason, the cheapest few rejected alternatives and every infeasible family's reason (JSON has all)."""
    out = [f"{indent}why: {decision.reason}"]
    priced = [a for a in decision.rejected if a.usd_per_hour is not None][:shown]
    unfit = [a for a in decision.rejected if a.usd_per_hour is None][:shown]
    for alt in priced + unfit:
        out.append(f"{indent}  - not {alt.option}: {alt.reason}")
    hidden = len(decision.rejected) - len(priced) - len(unfit)
    if hidden > 0:
        out.append(f"{indent}  ({hidden} more alternatives in plan --json)")
    return out
