"""What the compiler decided (``*Plan``): frozen, JSON-serialisable, the only input of renderers and components.

Field names are a contract: ``plan --json`` and later tools (cost, Pulumi components) read them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class PlanModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def _by_name(self, field: str) -> dict[str, Any]:
        """``name -> item`` of one of this plan's tuples, built once per tuple: renderers and cost look items
        up by name for every model, and a scan per lookup made 1,000 models quadratic.

        Kept in the instance ``__dict__`` beside the fields, as ``functools.cached_property`` keeps its value:
        pydantic's equality, hash, ``model_dump`` and JSON read the fields only. The index remembers the
        tuple it was built from, so a ``model_copy(update=...)`` that replaces the tuple never reads a stale
        one. The first item of a name wins, as a scan would find it."""
        items = getattr(self, field)
        cached = self.__dict__.get(f"_by_name_{field}")
        if cached is None or cached[0] is not items:
            cached = (items, {item.name: item for item in reversed(items)})
            self.__dict__[f"_by_name_{field}"] = cached
        return cached[1]


class Alternative(PlanModel):
    """An option the compiler considered and did not take, and why."""

    option: str
    reason: str
    usd_per_hour: float | None = None


class Decision(PlanModel):
    """A choice with its reason and the rejected alternatives, so reviewers can check it."""

    choice: str
    reason: str
    rejected: tuple[Alternative, ...] = ()


class Warning_(PlanModel):
    model: str
    message: str


class TensorPlan(PlanModel):
    name: str
    data_type: str  # Triton's enum name, e.g. TYPE_FP32
    dims: tuple[int, ...]


class AbSplitPlan(PlanModel):
    """A held split between two served versions (spec/versions.py AbSplitSpec): the generated client sends
    ``candidate_share`` of the requests naming no version to ``candidate``, the rest to ``control``."""

    control: int
    candidate: int
    candidate_share: float


class WarmupSamplePlan(PlanModel):
    """One input's warmup sample (spec/warmup.py), shipped as ``<model>/warmup/<input>`` (render/warmup.py)."""

    input: str
    file: str  # as models.yaml names it, beside models.yaml
    sha256: str  # of the file as committed
    content_base64: str  # the file's bytes


class VolumePlan(PlanModel):
    """A node's root volume (EBS gp3) as capacity/node_volume.py sizes it; the node group records its three figures."""

    size_gib: int
    iops: int
    throughput_mibps: int


class NodeResourcesPlan(PlanModel):
    """CPU (cores), memory, ephemeral storage, GPUs and pods of one node: what its kubelet offers pods
    (``allocatable``), what the stack keeps for DaemonSets, or what the busiest node's pods request."""

    cpu: float
    memory_gib: float
    ephemeral_storage_gib: float
    gpus: int
    pods: int


class ContainerResourcesPlan(PlanModel):
    """What one container of a workload's pod requests (and is limited to), decided by the plan so that the
    fit check and the rendered manifests read the same figures (capacity/pod_resources.py)."""

    name: str
    init: bool  # an init container: runs to completion before the others start
    cpu_millis: int
    memory_mib: int
    ephemeral_storage_gib: int  # 0: none requested (it writes only to the pod's emptyDirs)


class PodPlan(PlanModel):
    containers: tuple[ContainerResourcesPlan, ...]

    def container(self, name: str) -> ContainerResourcesPlan:
        return next(c for c in self.containers if c.name == name)

    def request(self, field: str) -> int:
        """The pod's effective request of ``field``, as the scheduler counts it: the larger of its largest
        init container and the sum of its other containers."""
        init = max((getattr(c, field) for c in self.containers if c.init), default=0)
        return max(init, sum(getattr(c, field) for c in self.containers if not c.init))


class RolloutPlan(PlanModel):
    """How a workload's pods are replaced on an update, and why (capacity/rollout.py)."""

    max_surge: int  # replicas above the HPA's max a rollout may add (a canary's: at its largest step)
    max_unavailable: int
    reason: str
    strategy: Literal["rolling", "canary"] = "rolling"
    steps: tuple[int, ...] = ()  # canary: traffic percentages, ending at 100
    pause_s: int = 0  # canary: how long each step is watched
    traffic: Literal["replicas", "gateway"] | None = None  # canary: how traffic is split
    extra_replicas_desired: int = 0  # canary: replicas above desired while it runs (what a rollout costs)


class ZoneSizePlan(PlanModel):
    """One zone's node group of a zonal layout (multi-node replicas): sized for whole replicas."""

    zone: str
    min_size: int
    desired_size: int
    max_size: int


class ReservationPlan(PlanModel):
    """Reserved capacity of a node group's type (an ODCR or a Capacity Block, plan/capacity/reservations.py):
    its nodes are launched before any other, and cost nothing more than the reservation, paid used or not."""

    id: str
    kind: Literal["odcr", "capacity-block"]
    instance_type: str
    zone: str  # the availability zone it is in (AWS's name, e.g. us-east-1a)
    count: int  # instances reserved
    ends: str | None  # YYYY-MM-DD; None: open-ended (an ODCR)
    usd_per_hour: float | None  # per reserved instance, used or not; None: unknown (no price for the type)
    price_basis: str  # where usd_per_hour came from


class ColdStartPlan(PlanModel):
    """A workload that scales to zero: what its first request waits for once it is idle at zero
    (plan/capacity/cold_start.py). Expected figures, each from the basis it states."""

    node_launch_s: int  # a GPU node from launch to Ready (the NVIDIA device plugin has registered its GPUs)
    image_pull_s: int  # the serving image, pulled and unpacked on the new node
    weights_s: int  # the weights each pod reads (S3 or the Hub, at the documented rate, or its disk share)
    engine_start_s: int  # the engine's own start after its weights are read (CUDA graphs, warmup)
    first_request_ms: float  # the first request's own latency once the engine is up (prefill or a batch)
    total_s: int  # what the first request waits in all
    basis: str


class NodeGroupPlan(PlanModel):
    name: str
    instance_type: str
    capacity_type: Literal["on-demand", "spot"]
    min_size: int
    desired_size: int
    max_size: int  # nodes for every workload's HPA max plus its rollout surge
    gpus_per_node: int
    gpu_memory_gib: float
    gpu_model: str
    vcpu: int
    ram_gib: float
    # The stack's zones the group spans (zone-1 is the first zone of its subnets, in AWS's order), and the
    # per-zone node groups of a zonal layout (empty: one group over every zone): capacity/node_groups.py.
    zones: tuple[str, ...]
    zonal: tuple[ZoneSizePlan, ...]
    zone_reason: str
    # Where pods write (emptyDirs, images): the instance store striped RAID0 by the node's bootstrap, or the
    # root volume; capacity/node_volume.py.
    ephemeral_storage_on: Literal["instance-store", "root-volume"]
    instance_store_gib: int
    root_volume_gib: int
    root_volume_iops: int
    root_volume_throughput_mibps: int
    allocatable: NodeResourcesPlan  # per node, as its kubelet reports it (hardware/kubelet.py)
    daemonset_allowance: NodeResourcesPlan  # per node, kept free for DaemonSets (deploy.daemonsetAllowance)
    requested: NodeResourcesPlan  # the busiest node at HPA max plus surge, serving images included (capacity/fit.py)
    workloads: tuple[str, ...]  # Triton servers and vLLM models placed here
    # gpu: GPU nodes (tainted, the NVIDIA AMI); cpu: CPU-only nodes of KIND_CPU Triton servers, one server pod per
    # node (gpus_per_node and gpu_memory_gib are 0, gpu_model empty; processor names the CPU).
    device: Literal["gpu", "cpu"] = "gpu"
    processor: str = ""
    # What provisions its nodes (modelfleet/deploy/provisioners): an EKS managed node group of instance_type,
    # or a Karpenter NodePool over instance_types (the type and its equivalents that pass the fit check, in
    # cost order: plan/capacity/provisioning.py) and capacity_types (spot falls back to on-demand).
    provisioner: Literal["managed", "karpenter"] = "managed"
    instance_types: tuple[str, ...] = ()  # () for a managed group: instance_type alone
    capacity_types: tuple[Literal["reserved", "spot", "on-demand"], ...] = ()  # () for a managed group: capacity_type
    # Spot: nodes kept on-demand for the availability floors that cannot ride on spot alone (a reclaim can take
    # every spot node of a type at once); their workloads' on_demand_base_replicas say whose.
    on_demand_base_nodes: int = 0
    reservations: tuple[ReservationPlan, ...] = ()  # of instance_type, used before any other capacity
    reserved_nodes: int = 0  # of its nodes at desired the reservations hold (at most their count)

    @property
    def allowed_types(self) -> tuple[str, ...]:
        return self.instance_types or (self.instance_type,)

    @property
    def pod_slots(self) -> int:
        """Pods of one GPU each a node holds (its GPUs), or, on a CPU node, its one Triton server pod: what the
        node counts and fit checks divide a node by."""
        return self.gpus_per_node if self.device == "gpu" else 1

    @property
    def root_volume(self) -> VolumePlan:
        return VolumePlan(size_gib=self.root_volume_gib, iops=self.root_volume_iops,
                          throughput_mibps=self.root_volume_throughput_mibps)


class PriorityLevelPlan(PlanModel):
    """One priority class of a model: Triton's level (1 = served first) and its own queue policy."""

    name: str
    level: int
    share: float  # of the model's peak_rps
    p99_latency_ms: float
    queue_timeout_us: int
    max_queue_size: int


class SequencePlan(PlanModel):
    """Triton's sequence batcher for a stateful model (control inputs START, END, READY, CORRID)."""

    strategy: Literal["direct", "oldest"]
    idle_timeout_us: int  # max_sequence_idle_microseconds: a sequence idle this long is released
    max_sequences: int  # as declared
    slots: int  # sequences served at once: max_batch_size (at least 1) x instances (direct), candidates (oldest)
    max_queue_delay_us: int


class SessionAffinityPlan(PlanModel):
    """A server of stateful models: its Service keeps each client IP on one pod (plan/triton/sequences.py)."""

    timeout_s: int  # sessionAffinityConfig.clientIP.timeoutSeconds: the longest idle release of its sequences
    decision: Decision


class TritonModelPlan(PlanModel):
    name: str
    serving: Literal["triton"] = "triton"
    type: str
    server: str
    node_group: str
    instance_type: str
    replicas: int  # = the server's replicas: every replica of a server loads every model on it
    gpus_per_replica: int  # the GPUs of one server replica (shared with the other models on it)
    gpu_share: float  # fraction of each replica's GPU this model accounts for (memory or compute, larger)
    weights_gib: float
    gpu_memory_gib: float  # all instances of this model on one GPU, with runtime overhead
    backend: str
    platform: str
    artifact: str
    max_batch_size: int
    instance_count: int
    queue_timeout_us: int
    max_queue_delay_us: int
    max_queue_size: int
    response_cache: bool
    versions: tuple[int, ...] | None  # the folders Triton loads (version_policy specific); None: the latest
    inputs: tuple[TensorPlan, ...]
    outputs: tuple[TensorPlan, ...]
    peak_rps: float
    p99_latency_ms: float
    rps_per_instance: float  # on this GPU, after scaling from the measured GPU
    compute_ms: float
    # Whether compute_ms and rps_per_instance rest on a measured profile that applies to this GPU, and what
    # they rest on: the measurement (where, when, how scaled), or, UNMEASURED, an execution budget floored
    # by the datasheet bound (plan/triton/speed.py).
    measured: bool
    speed_basis: str
    bound_ms: float | None  # a full batch's datasheet lower bound on this GPU (None: size given as memory_gib)
    decisions: tuple[Decision, ...]
    device: Literal["gpu", "cpu"] = "gpu"  # KIND_GPU or KIND_CPU instances
    priority_levels: tuple[PriorityLevelPlan, ...] = ()  # highest first; empty: one queue
    default_priority_level: int = 0  # the level of a request that names none (0 when there are no levels)
    sequence: SequencePlan | None = None  # stateful: the sequence batcher instead of the dynamic one
    decoupled: bool = False  # streaming: several responses per request; the SLA is the first one's
    preferred_batch_sizes: tuple[int, ...] = ()  # dynamic_batching.preferred_batch_size (the profile's)
    ab_split: AbSplitPlan | None = None  # a held split between two of its versions; None: none
    version_sha256: str | None = None  # the pinned folder's content digest, checked by the pod (spec/versions.py)
    warmup_dims: tuple[tuple[int, ...], ...] = ()  # per input, the warmup request's dims (-1 at its typical size)
    warmup_samples: tuple[WarmupSamplePlan, ...] = ()  # inputs warmed with a sample file instead of zeros
    # KIND_CPU: the vCPUs its instances keep busy in each replica (instance_count x vcpu_per_instance), which
    # its backend's thread count is set to per instance; 0 on a GPU.
    cpu_cores: int = 0
    # On a CPU: what placing it on the GPUs instead would add to the stack, USD per hour at the ranking prices
    # (plan/triton/devices.py); None on a GPU, or when no GPU placement meets its SLA. The cost preview's saving.
    gpu_placement_usd_per_hour: float | None = None
    # Its instances' rate-limiter priority on a shared GPU (1 = picked first; plan/triton/rate_limiter.py); 0: none.
    rate_limiter_priority: int = 0
    team: str | None = None  # models.yaml's team (plan/teams.py: labels, tags and cost per team)
    # What the alerts protect (render/observability): sla.availability (its default, 99.9, is the spec's).
    availability: float = 99.9


class PipelineStepPlan(PlanModel):
    """One step of an ensemble: its model, which ensemble tensors feed it and which it produces, its share."""

    model: str
    input_map: tuple[tuple[str, str], ...]  # (the model's input, the ensemble tensor)
    output_map: tuple[tuple[str, str], ...]  # (the model's output, the ensemble tensor)
    budget_ms: float  # its share of the pipeline's p99 (plan/triton/pipelines.py)
    queue_timeout_us: int  # as compiled for the model (the tighter of its own p99 and this share)
    # The version the ensemble calls (ensemble_scheduling's model_version): the step's, else the model's one
    # pinned version; -1, Triton's "the latest", only for a model that pins none (spec/pipelines.py).
    model_version: int = -1


class PipelineLlmStepPlan(PlanModel):
    """An LLM step of an ensemble: a generated Triton python model (``name``) on the pipeline's server that sends
    each prompt to the LLM's vLLM Service (OpenAI completions) and returns the text (plan/triton/llm_steps.py)."""

    name: str  # the python step's Triton model name: <pipeline>.<llm> (no model or pipeline name has a dot)
    llm: str  # the vLLM model it calls (its Service and its --served-model-name)
    url: str  # http://<llm>.<namespace>.svc:<port>/v1/completions
    max_output_tokens: int  # max_tokens of each request
    ttft_p99_ms: float  # the LLM plan's predictions the share is made of
    tpot_ms: float
    timeout_ms: int  # its share of the pipeline's p99: TTFT + (max_output_tokens - 1) x TPOT, rounded up
    instances: int  # python instances: the pipeline's peak requests in flight at this step (Little's law)


class PipelinePlan(PlanModel):
    """A pipeline served as a Triton ensemble on the server of its steps."""

    name: str
    server: str
    node_group: str
    instance_type: str
    max_batch_size: int  # the smallest of its steps' (Triton requires no more)
    inputs: tuple[TensorPlan, ...]
    outputs: tuple[TensorPlan, ...]
    steps: tuple[PipelineStepPlan, ...]  # in an order that runs (each after what it reads)
    p99_latency_ms: float
    peak_rps: float
    decisions: tuple[Decision, ...]
    # A pipeline fails when any step fails, so it promises no more than its least available step (the spec has
    # no availability of its own); the alerts hold it to that.
    availability: float = 99.9
    team: str | None = None
    llm_steps: tuple[PipelineLlmStepPlan, ...] = ()  # its LLM steps' python models (also in steps, by name)


class TritonServerPlan(PlanModel):
    """One Triton Deployment: a set of models packed onto the same GPU(s), replicated."""

    name: str
    node_group: str
    instance_type: str
    replicas: int
    min_replicas: int
    max_replicas: int
    spread_zones: bool  # replicas must land in different availability zones
    gpus_per_replica: int
    models: tuple[str, ...]
    gpu_memory_used_gib: float
    gpu_compute_used: float  # fraction of the GPU's compute at peak, after target utilisation
    cache_size_bytes: int
    memory_request_gib: float
    args: tuple[str, ...]
    image: str
    python_shm_bytes: int
    decision: Decision  # why this instance type, and the alternatives
    rollout: RolloutPlan
    pod: PodPlan | None = None  # set once the plan knows its node group (capacity/pod_resources.py)
    # Names it had under earlier naming schemes (triton-<anchor model>): the Pulumi program aliases them, so a
    # deployed stack's resources carry over.
    former_names: tuple[str, ...] = ()
    # What the cluster knows it by: its Kubernetes objects' names and selector labels, its S3 config prefix.
    # The name itself, or its former name where the stack lists it (deploy.formerServerNames), so that
    # the rename replaces nothing there; None: the name.
    physical_name: str | None = None
    device: Literal["gpu", "cpu"] = "gpu"  # cpu: KIND_CPU instances, a whole CPU node per replica (gpus_per_replica 0)
    # Whether its models' batches run one at a time on the GPU (Triton's rate limiter), and why; None: one model
    # on its GPU (or a CPU server, whose cores are split between its instances), nothing to contend with.
    rate_limiter: Decision | None = None
    # Set when it serves a stateful model: a sequence's state lives in one pod, so its Service keeps a client on
    # one pod (sessionAffinity: ClientIP); None: any pod answers any request.
    session_affinity: SessionAffinityPlan | None = None
    # Spot stack: replicas of its availability floor held on on-demand nodes (its group's on_demand_base_nodes).
    on_demand_base_replicas: int = 0
    cold_start: ColdStartPlan | None = None  # set when it scales to zero (min_replicas 0)

    @property
    def kube_name(self) -> str:
        """The name its Kubernetes objects, selector labels and S3 config prefix carry (``physical_name``)."""
        return self.physical_name or self.name

    @property
    def slots_per_replica(self) -> int:
        """What one replica's pod holds of its node: its GPUs, or the whole CPU node (one slot)."""
        return self.gpus_per_replica if self.device == "gpu" else 1


class WeightsPlan(PlanModel):
    """Where a vLLM model's checkpoint comes from at each cold start, and what one start reads (plan/llm/weights.py).

    ``s3``: the artifact is an S3 prefix, streamed by runai_streamer. ``staged``: a pinned Hub checkpoint, copied
    once per revision into the stack's bucket by a Job, then streamed like ``s3``: a recreated pod or group reads
    S3 again, never the Hub. ``hub``: every pod downloads the Hub checkpoint into its own emptyDir (gone with the
    pod: a recreated group downloads it again)."""

    source: Literal["s3", "staged", "hub"]
    uri: str  # what vLLM serves: the S3 prefix (s3, staged) or the Hub id (hub)
    hub_id: str | None = None  # staged: the repository copied
    revision: str | None = None  # staged: its commit (the S3 prefix's last segment)
    # runai_streamer's distributed mode: the replica's ranks split the reads and share them over NCCL
    distributed: bool = False
    pod_read_gib: float  # what one pod reads at a cold start (from S3 or the Hub), what its startup budget counts
    rank_read_gib: float  # what one GPU's process reads of it
    stage_gib: float = 0.0  # staged: what the Job copies from the Hub, once per revision
    reason: str


class LengthsPlan(PlanModel):
    """Prompt or answer lengths as simulated: a distribution's mean, p99 and cap, or a trace's path."""

    distribution: str | None = None  # fixed | exponential | lognormal | histogram; None: a trace
    mean: float | None = None
    p99: float | None = None
    max: int | None = None
    trace: str | None = None  # the trace file, relative to models.yaml


class TrafficPlan(PlanModel):
    """The peak traffic one replica was simulated under (spec/traffic.py; requests spread at random)."""

    arrivals: Literal["poisson", "bursty", "closed"]
    requests_per_s_per_replica: float | None = None  # open arrivals: the peak rate over the replicas
    cv: float | None = None  # bursty: the gaps' coefficient of variation
    users_per_replica: float | None = None  # closed: the users over the replicas (each request routed at random)
    think_time_s: float | None = None
    input: LengthsPlan
    output: LengthsPlan


class LlmEstimatesPlan(PlanModel):
    """How fast one replica serves at peak, as the planner predicted it: TTFT and TPOT percentiles simulated
    (plan/llm/speed/simulation.py) under ``traffic``, with step times from the performance model."""

    prefill_ms: float  # one prompt of input_tokens on an idle replica, to its first token
    ttft_p99_ms: float  # p99 time to first token at peak, simulated: queueing for a slot and behind prompts included
    tpot_ms: float  # time per output token with sequences_per_replica sequences running
    tpot_at_max_num_seqs_ms: float  # with max_num_seqs running: the slowest a stream gets
    sequences_per_replica: int  # sequences in flight on one replica at peak
    input_tokens: int  # the request shape the figures are for (sla.avg_input_tokens, avg_output_tokens)
    output_tokens: int
    output_tokens_per_s_per_replica: float
    source: str  # what the figures rest on: the simulation, over step times from the calibration (database and
    # fit date), "datasheet roofline: ...", or a measured profile
    traffic: TrafficPlan | None = None
    ttft_p50_ms: float | None = None
    ttft_p99_bound_ms: float | None = None  # the upper end of the p99's 95% interval: what is held to the SLA
    tpot_p50_ms: float | None = None  # per request, (end - first token) / (output tokens - 1), as vllm bench serve
    tpot_p99_ms: float | None = None
    tpot_p99_bound_ms: float | None = None
    itl_p99_ms: float | None = None  # every gap between two tokens of a stream
    simulated_requests: int | None = None  # measured requests of the simulation the figures come from
    closed_form_ttft_p99_ms: float | None = None  # the closed form's p99 TTFT (Kingman), for comparison
    simulations: int | None = None  # simulations run to choose this layout's max_num_seqs and replicas


class LlmMeasuredPlan(PlanModel):
    """An LLM's measured profile as the plan reports it (spec/profiles.py), and what the plan made of it
    (plan/llm/measured.py): checked against the SLA only when ``applies`` (its GPU and tensor-parallel size)."""

    measured_on: str
    measured_at: str
    tensor_parallel: int
    concurrency: int
    input_tokens: int
    output_tokens: int
    ttft_median_ms: float
    ttft_p99_ms: float
    tpot_median_ms: float
    tpot_p99_ms: float
    output_tokens_per_s: float
    applies: bool
    verdict: str


class VllmModelPlan(PlanModel):
    name: str
    serving: Literal["vllm"] = "vllm"  # vLLM's own server (Triton's vLLM backend is refused: spec/models.py)
    type: str = "llm"
    node_group: str
    instance_type: str
    replicas: int
    min_replicas: int
    max_replicas: int
    spread_zones: bool
    gpus_per_replica: int
    nodes_per_replica: int
    gpus_per_pod: int
    tensor_parallel_size: int
    pipeline_parallel_size: int
    max_num_seqs: int
    max_model_len: int
    weights_gib: float
    kv_cache_gib: float  # per replica, all GPUs
    # Reading the Hub (a pod, or the staging Job) needs the stack's hfToken: false only for a repository anyone may
    # download (hub.gated: false, or the preset's own ungated repository; LlmModelSpec.hub_gated)
    hub_token_required: bool = True
    kv_cache_tokens: int  # per replica
    gpu_memory_utilization: float
    dtype: str  # the weights' dtype in GPU memory (size.dtype)
    kv_cache_dtype: str
    # The p99 time to first token at peak, as estimates.ttft_p99_ms (kept for tools that read this name).
    estimated_ttft_ms: float
    artifact: str
    args: tuple[str, ...]
    shm_size_gib: float
    memory_request_gib: float
    image: str
    decisions: tuple[Decision, ...]
    quantization: str | None = None  # vLLM --quantization: the checkpoint's format, or online fp8
    checkpoint_gib: float | None = None  # the checkpoint as stored (16-bit when quantized while loading)
    rollout: RolloutPlan | None = None  # always set by the compiler (its server's rollout)
    pod: PodPlan | None = None  # set once the plan knows its node group (capacity/pod_resources.py)
    max_num_batched_tokens: int = 0  # vLLM --max-num-batched-tokens (plan/llm_speed.batched_tokens)
    expert_parallel: bool = False  # vLLM --enable-expert-parallel (a MoE model's experts dealt out whole)
    lora_adapters: tuple[str, ...] = ()  # names of the LoRA adapters served on top (lora.adapters)
    # Pinned adapters the pod's download step fetches before vLLM starts: (local folder, Hub id, commit).
    lora_downloads: tuple[tuple[str, str, str], ...] = ()
    lora_gib: float = 0.0  # vLLM's LoRA buffers per GPU
    # What set this model's size: memory, ttft, tpot, availability, the max_num_seqs cap or an override.
    binding_constraint: str = ""
    estimates: LlmEstimatesPlan | None = None
    revision: str | None = None  # the pinned checkpoint: a Hub commit, or the s3:// sub-prefix (in artifact)
    # The canary analysis's TPOT gate: sla.p99_tpot_ms, or without one the TPOT predicted with max_num_seqs
    # running (estimates.tpot_at_max_num_seqs_ms), the slowest the plan lets a stream get.
    tpot_ms: float = 0.0
    measured: LlmMeasuredPlan | None = None  # profile's measurement (None: not measured)
    team: str | None = None  # models.yaml's team (plan/teams.py: labels, tags and cost per team)
    # The SLA the alerts protect (render/observability): p99 time to first token and (where the language has
    # it) p99 time per output token; None: no TPOT target, so no TPOT alert.
    p99_ttft_ms: float
    p99_tpot_ms: float | None = None
    availability: float = 99.9  # sla.availability (the spec's default)
    weights: WeightsPlan | None = None  # always set by the compiler (plan/llm/weights.py)
    # Spot stack: replicas of its availability floor held on on-demand nodes (its group's on_demand_base_nodes).
    on_demand_base_replicas: int = 0
    cold_start: ColdStartPlan | None = None  # set when it scales to zero (min_replicas 0)


class FleetPlan(PlanModel):
    environment: str
    region: str
    capacity_type: Literal["on-demand", "spot"]
    kubernetes_version: str
    namespace: str
    catalogue_as_of: str
    node_groups: tuple[NodeGroupPlan, ...]
    triton_servers: tuple[TritonServerPlan, ...]
    models: tuple[TritonModelPlan | VllmModelPlan, ...]
    warnings: tuple[Warning_, ...]
    pipelines: tuple[PipelinePlan, ...] = ()  # Triton ensembles, by name
    # The Gateway API Gateway clients come through (modelfleet:gateway): canaries split traffic by HTTPRoute.
    gateway_name: str | None = None
    gateway_namespace: str | None = None
    # the stack's callers: each Triton server counts its requests per caller (render/k8s/callers.py)
    callers: tuple[str, ...] = ()

    def model(self, name: str) -> TritonModelPlan | VllmModelPlan:
        return self._by_name("models")[name]

    def node_group(self, name: str) -> NodeGroupPlan:
        return self._by_name("node_groups")[name]

    def server(self, name: str) -> TritonServerPlan:
        return self._by_name("triton_servers")[name]

    def pipeline(self, name: str) -> PipelinePlan:
        return self._by_name("pipelines")[name]
