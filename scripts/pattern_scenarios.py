"""One denoise step of `scen bench --pattern`'s diffusion patterns as a scenario (Wan Ulysses,
Flux TP, CFG), written once for the scripts that run them: scripts/bench-one-clock.sh (the
step's virtual time against bench's prediction) and scripts/bench-pattern-cost.sh (what the step
costs the simulator). tests/sim/keeps_its_word.rs writes the same steps in Rust.
"""

# scen bench --pattern's default shapes (crates/core/src/perf/pattern.rs, src/cmd/bench.rs).
SEQ, HEADS, HEAD_DIM, HIDDEN, TEXT_LEN = 4096, 16, 64, 3072, 512
# Each pattern's own layer count (Wan 2.1 1.3B 30, Flux 57) and its sglang group.
LAYERS = {"wan-ulysses": 30, "flux-tp": 57, "cfg": 1}
GROUP = {"wan-ulysses": "ulysses", "flux-tp": "tp", "cfg": "cfg"}


def steps(name, n, dtype, seq=SEQ, layers=None):
    """The pattern's collectives of one denoise step on `n` ranks, as sglang issues them."""
    layers = LAYERS[name] if layers is None else layers

    def step(body):
        return f'\n[[step]]\n{body}dtype = "{dtype}"\n'

    s = ""
    if name == "wan-ulysses":
        for _ in range(layers):
            s += step(f'op = "all_to_all_4d"\ngroup = "ulysses"\nshape = [3, {seq}, {HEADS}, {HEAD_DIM}]\nscatter_dim = 2\ngather_dim = 1\n')
            s += step(f'op = "all_to_all_4d"\ngroup = "ulysses"\nshape = [1, {seq * n}, {HEADS // n}, {HEAD_DIM}]\nscatter_dim = 1\ngather_dim = 2\n')
    elif name == "flux-tp":
        s += step(f'op = "all_gather"\ngroup = "tp"\nshape = [{seq}, {HIDDEN // n}]\n')
        for _ in range(2 * layers):
            s += step(f'op = "all_reduce"\ngroup = "tp"\nshape = [{seq}, {HIDDEN}]\n')
    else:
        s += step(f'op = "broadcast"\ngroup = "cfg"\nsrc = 0\nshape = [{TEXT_LEN}, {HIDDEN}]\n')
        s += step(f'op = "all_gather"\ngroup = "cfg"\nshape = [{seq}, {HIDDEN}]\n')
    return s


def scenario(name, n, body, description, model=None):
    """sglang's v2 start-up on one node of `n` ranks, a warm-up all_reduce on the pattern's group
    (its communicator is made lazily), `body` (a step's collectives, or nothing), a barrier;
    symbolic payloads; `[world.links] model = MODEL` when given."""
    group = GROUP[name]
    s = f'[scenario]\ndescription = "{description}"\n\n[world]\nranks_per_node = {n}\nplatform = "xpu"\n'
    if model:
        s += f'\n[world.links]\nmodel = "{model}"\n'
    s += '\n[sim]\npayloads = "symbolic"\n'
    s += '\n[[step]]\nop = "init_distributed_environment"\nversion = "v2"\n'
    s += f'\n[[step]]\nop = "initialize_model_parallel"\n{group} = {n}\n'
    s += f'\n[[step]]\nop = "all_reduce"\ngroup = "{group}"\nshape = [1]\n'
    s += body
    s += '\n[[step]]\nop = "barrier"\n\n[[expect]]\noutcome = "completes"\n'
    return s
