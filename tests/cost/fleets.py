"""Hypothesis strategies: random but always-valid fleets and environments, built as specs (no YAML)."""

from __future__ import annotations

from hypothesis import strategies as st

from modelfleet.spec.environment import EnvironmentSpec
from modelfleet.spec.models import ClassicModelSpec, LlmModelSpec

AVAILABILITY = (99.0, 99.5, 99.9, 99.95, 99.99)
LLM_PRESETS = ("llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b", "mistral-7b", "qwen2.5-7b", "llama-3.3-70b")


@st.composite
def classic_models(draw, name: str) -> ClassicModelSpec:
    p99 = draw(st.sampled_from((20.0, 50.0, 100.0, 250.0)))
    overrides = {}
    if draw(st.booleans()):
        overrides["replicas"] = draw(st.integers(1, 4))
    if draw(st.integers(0, 5)) == 0:
        overrides["dedicated_gpu"] = True
    kind = draw(st.sampled_from(("vision", "nlp", "tabular", "embedding")))
    profile = {"rps_per_instance": draw(st.floats(100.0, 20000.0).map(lambda v: round(v))),
               "measured_on": draw(st.sampled_from(("a10g", "t4", "l4"))),
               "compute_ms": round(p99 * draw(st.floats(0.02, 0.3)), 2)}
    device = {}
    if kind == "tabular" and draw(st.booleans()):  # measured on a CPU too: a candidate for KIND_CPU
        profile["cpu"] = {"rps_per_instance": draw(st.floats(200.0, 10000.0).map(lambda v: round(v))),
                          "compute_ms": round(p99 * draw(st.floats(0.02, 0.3)), 2),
                          "measured_on": draw(st.sampled_from(("c7i", "m7i", "c6i"))),
                          "vcpu_per_instance": draw(st.integers(1, 4))}
        if not overrides.get("dedicated_gpu") and draw(st.integers(0, 3)) == 0:
            device = {"device": "cpu"}
    return ClassicModelSpec.model_validate({
        "name": name, "type": kind, "framework": "onnx", **device,
        "artifact": f"s3://bucket/triton/{name}",
        "size": {"memory_gib": draw(st.floats(0.05, 12.0).map(lambda v: round(v, 2)))},
        "inputs": [{"name": "x", "dtype": "fp32", "dims": [16]}],
        "outputs": [{"name": "y", "dtype": "fp32", "dims": [1]}],
        "sla": {"p99_latency_ms": p99, "peak_rps": draw(st.floats(1.0, 6000.0).map(lambda v: round(v, 1))),
                "availability": draw(st.sampled_from(AVAILABILITY))},
        "profile": profile,
        "overrides": overrides,
    })


@st.composite
def llm_models(draw, name: str) -> LlmModelSpec:
    overrides = {"replicas": draw(st.integers(1, 3))} if draw(st.integers(0, 3)) == 0 else {}
    return LlmModelSpec.model_validate({
        "name": name, "type": "llm", "artifact": f"org/{name}", "size": {"dtype": "bf16"},
        "architecture": draw(st.sampled_from(LLM_PRESETS)),
        "sla": {"max_context_tokens": draw(st.sampled_from((2048, 4096, 8192))),
                "peak_concurrent_sequences": draw(st.integers(1, 64)), "p99_ttft_ms": 20000,
                "availability": draw(st.sampled_from(AVAILABILITY))},
        "overrides": overrides,
    })


def models(name: str):
    return st.one_of(classic_models(name), classic_models(name), llm_models(name))


@st.composite
def fleets(draw, max_models: int = 7) -> list:
    count = draw(st.integers(1, max_models))
    return [draw(models(f"m{i}")) for i in range(count)]


ENVIRONMENTS = (  # prod and dev allow CPU families too (KIND_CPU models); staging none (device: cpu is an error)
    EnvironmentSpec(name="prod", region="us-east-1", instance_families=("g5", "g6", "g6e", "p4d", "p5", "c7i", "m7i")),
    EnvironmentSpec.model_validate({"name": "dev", "region": "us-east-1", "capacity_type": "spot",
                                    "instance_families": ("g4dn", "g5", "g6", "g6e", "c7i"),
                                    "replicas": {"single_replica": True}}),
    EnvironmentSpec.model_validate({"name": "staging", "region": "us-east-1", "instance_families": ("g6", "g6e"),
                                    "replicas": {"max_scale_factor": 1.0}, "cluster": {"create": True}}),
)


# Instance types a generated reservation may hold: sizes of every GPU family the environments above allow.
RESERVABLE = ("g4dn.xlarge", "g5.xlarge", "g5.12xlarge", "g6.xlarge", "g6.12xlarge", "g6e.xlarge", "g6e.12xlarge",
              "p4d.24xlarge")


@st.composite
def reservations(draw, types: tuple[str, ...] = RESERVABLE, max_size: int = 2) -> list[dict]:
    """Capacity reservations as a stack writes them (spec field names): ODCRs, or Capacity Blocks with an end
    date and their own price; ids stable by position (cr- and 17 hex digits)."""
    drawn = draw(st.lists(st.tuples(st.sampled_from(types), st.integers(1, 3), st.booleans(),
                                    st.sampled_from(("us-east-1a", "us-east-1b"))), max_size=max_size))
    out = []
    for i, (instance_type, count, block, zone) in enumerate(drawn, 1):
        ident = {"capacity_block_id": f"cr-{i:017x}", "ends": "2027-01-31", "usd_per_hour": 5.0} if block else {
            "id": f"cr-{i:017x}"}
        out.append({"instance_type": instance_type, "zone": zone, "count": count, **ident})
    return out


def with_capacity(env: EnvironmentSpec, *, provisioner: str = "managed", reserved: list[dict] | tuple = (),
                  minimum: int | None = None) -> EnvironmentSpec:
    """``env`` with the capacity settings the example stacks rarely use: Karpenter, reservations, scale to zero."""
    data = env.model_dump()
    data["nodes"] = {**data["nodes"], "provisioner": provisioner}
    data["capacity_reservations"] = list(reserved)
    data["replicas"] = {**data["replicas"], "minimum": minimum}
    return EnvironmentSpec.model_validate(data)


@st.composite
def capacity_environments(draw, provisioner: str | None = None, minimum: int | None | bool = False,
                          reserve: bool = True) -> EnvironmentSpec:
    """One of ENVIRONMENTS with a provisioner (drawn unless given), reservations of its allowed types (when
    ``reserve``) and a minimum of 0 replicas (drawn when ``minimum`` is False, else as given)."""
    env = draw(st.sampled_from(ENVIRONMENTS))
    allowed = tuple(t for t in RESERVABLE if t.split(".")[0] in env.instance_families)
    return with_capacity(
        env, provisioner=provisioner or draw(st.sampled_from(("managed", "karpenter"))),
        reserved=draw(reservations(allowed)) if reserve and allowed else (),
        minimum=draw(st.sampled_from((None, 0))) if minimum is False else minimum)


def summary(model) -> str:
    """One line per model for failure messages (the full spec repr is unreadable)."""
    if isinstance(model, LlmModelSpec):
        return (f"{model.name}: llm {model.architecture} ctx {model.sla.max_context_tokens} seqs "
                f"{model.sla.peak_concurrent_sequences} avail {model.sla.availability} "
                f"replicas={model.overrides.replicas}")
    return (f"{model.name}: {model.type} mem {model.size.memory_gib} p99 {model.sla.p99_latency_ms} rps "
            f"{model.sla.peak_rps} avail {model.sla.availability} profile {model.profile.rps_per_instance}@"
            f"{model.profile.measured_on} compute {model.profile.compute_ms} replicas={model.overrides.replicas} "
            f"dedicated={model.overrides.dedicated_gpu} device={model.device} cpu={model.profile.cpu}")
