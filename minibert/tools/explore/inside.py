"""Inside the encoder, with the model's own numbers: every layer's and head's attention, and one
token followed through one layer.

    attention        attention_maps.py's attention_probabilities (Encoder, output_attentions=True)
    inside a layer   the encoder's own pass (output_hidden_states=True: the recipe, on the padded
                     grid), read through forward hooks on the layer's named submodules: the two
                     sublayers, their LayerNorms, SelfAttention (what it read, and its `Sequences`)
                     and its `out`, FeedForward's `up` and `down`, and the E → H projection. The
                     queries, keys and values are SelfAttention.heads' on what the attention read,
                     the probabilities SelfAttention.probabilities', and the scores what the
                     softmax read inside it (`SoftmaxInputs`). Nothing is computed here but
                     indexing: each number is one a module of the model returned or read.

Each stage names the line that computed it (`STAGES`, found in the source by code_ran.code_line).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from ..attention_maps import attention_probabilities
from .code_ran import code_line
from .example import Example
from .guesses import inputs
from .session import Session
from .step import Step

STAGES = {  # each stage of a layer: the function that computes it, and a piece of the line that does
    "projection": ("minibert.model:Encoder.embed", "self.embedding_projection("),
    "input": ("minibert.model:Encoder.look_inside", "self.apply_layer(depth, x, sequences)"),
    "norm_before": ("minibert.model:Sublayer.fn_input", "self.norm(x)"),
    "qkv": ("minibert.attention:SelfAttention.heads", "self.qkv(x)"),
    "rotary": ("minibert.attention:SelfAttention.heads", "rotate("),
    "scores": ("minibert.attention:attention_probs", "q @ k.transpose"),
    "mask": ("minibert.attention:attention_probs", "masked_fill("),
    "softmax": ("minibert.attention:attention_probs", ".softmax(dim=-1)"),
    "mix_sdpa": ("minibert.attention:attend", "scaled_dot_product_attention("),
    "mix_naive": ("minibert.attention:attend", "@ v"),
    "heads": ("minibert.attention:SelfAttention.forward", "context = attend("),
    "projected": ("minibert.attention:SelfAttention.forward", "self.out("),
    "residual": ("minibert.model:Sublayer.residual_add", "residual +"),
    "norm_after": ("minibert.model:Sublayer.residual_add", "self.norm(x)"),
    "feed_forward": ("minibert.model:FeedForward.forward", "self.down(self.act(self.up(x)))"),
}


def model_input(session: Session, example: Example, step: Step) -> tuple[torch.Tensor, str]:
    """The ids the kept model reads for this example, and what they are in words: the masked text,
    or for ELECTRA's discriminator the generator's samples in the masked places (the text as written
    where the objectives did not run)."""
    if session.head != "rtd":
        return example.batch["input_ids"], "the text as masked"
    if step.seen:
        return step.seen["input_ids"], "the text with the generator's samples in the masked places, as the discriminator read it"
    return example.original[None], "the text as written"


def attention_panel(session: Session, example: Example, step: Step) -> dict:
    """Every layer's and head's attention over the example as the model saw it [layers][heads][T][T]."""
    ids, shown = model_input(session, example, step)
    probabilities = attention_probabilities(session.encoder, inputs({**example.batch, "input_ids": ids}))
    return {"tokens": [session.tokenizer.piece(int(i)) for i in ids[0]], "shown": shown,
            "weights": probabilities.double().mul(1000).round().div(1000).tolist()}  # to 3 places, in one call


class SoftmaxInputs(TorchFunctionMode):
    """While open, keeps what every softmax reads: inside attention_probs, the scores q·k/√d of
    each query over the keys (a padding key's at the lowest float), as the model computed them."""

    SOFTMAX = {torch.Tensor.softmax, torch.softmax, torch.nn.functional.softmax}

    def __init__(self):
        super().__init__()
        self.inputs: list[torch.Tensor] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in self.SOFTMAX:
            self.inputs.append(args[0])
        return func(*args, **(kwargs or {}))


def recorded(encoder: nn.Module, modules: dict[str, nn.Module], batch: dict) -> dict[str, list]:
    """Run the encoder's look-inside pass on `batch` and keep, per watched module, what each of its
    calls read and returned, in call order: {name: [(args, output), ...]}."""
    calls = {name: [] for name in modules}
    hooks = [module.register_forward_hook(lambda m, args, output, name=name: calls[name].append((args, output)))
             for name, module in modules.items()]
    try:
        with torch.no_grad():
            encoder(**batch, output_hidden_states=True)
    finally:
        for hook in hooks:
            hook.remove()
    return calls


def rounded(vector: torch.Tensor) -> list[float]:
    return vector.double().mul(1e6).round().div(1e6).tolist()  # to 6 places: JSON stays short, ≤ 5e-7 off


def stage(stage_id: str, values: torch.Tensor, code: str | None = None) -> dict:
    return {"id": stage_id, "values": rounded(values), "code": code_line(*STAGES[code or stage_id])}


def inside_panel(session: Session, example: Example, step: Step, position: int, layer: int) -> dict:
    """One token (`position`) through one layer (`layer`) of the model as it read the example, stage
    by stage in the order the run's `norm` puts them (post-LN: residual, then LayerNorm; pre-LN:
    LayerNorm first, then the residual), each stage's vector at that token and the line that made it."""
    encoder, config = session.encoder, session.encoder.config
    ids, _ = model_input(session, example, step)
    if not (isinstance(layer, int) and 0 <= layer < config.num_layers):
        raise ValueError(f"layer must be a whole number from 0 to {config.num_layers - 1}, got {layer!r}")
    if not (isinstance(position, int) and 0 <= position < ids.shape[1]):
        raise ValueError(f"position must be a whole number from 0 to {ids.shape[1] - 1} (the example's tokens), got {position!r}")
    attention, feed_forward = encoder.layer(layer)
    calls = recorded(encoder, {"attention": attention, "attention.norm": attention.norm, "attention.fn": attention.fn,
                               "out": attention.fn.out, "feed_forward": feed_forward, "feed_forward.norm": feed_forward.norm,
                               "up": feed_forward.fn.up, "down": feed_forward.fn.down,
                               "projection": encoder.embedding_projection}, inputs({**example.batch, "input_ids": ids}))
    a, f = layer // len(encoder.attention), layer // len(encoder.feed_forward)  # a module shared by n depths: its call at this one

    def read(name: str, call: int) -> torch.Tensor:  # what a module's call read, at the token
        return calls[name][call][0][0][0, position]

    def returned(name: str, call: int) -> torch.Tensor:  # what it returned, at the token
        return calls[name][call][1][0, position]

    def sublayer(name: str, call: int, branch: list[dict], suffix: str = "") -> list[dict]:
        """A sublayer's stages in the order its norm puts them: pre-LN normalizes, runs the branch,
        adds the residual; post-LN runs the branch, adds the residual, normalizes."""
        norm = f"{name}.norm"
        if config.norm == "pre":
            around = [stage("norm_before", returned(norm, call))], [stage("residual", returned(name, call))]
        else:
            around = [], [stage("residual", read(norm, call)), stage("norm_after", returned(norm, call))]
        return [{**s, "id": s["id"] + suffix} for s in around[0]] + branch + [{**s, "id": s["id"] + suffix} for s in around[1]]

    stages = [stage("input", read("attention", a))]
    stages += sublayer("attention", a, [attention_stage(attention.fn, calls["attention.fn"][a], read("out", a), position),
                                        stage("heads", read("out", a)), stage("projected", returned("out", a))])
    stages += sublayer("feed_forward", f, [stage("up", returned("up", f), "feed_forward"), stage("act", read("down", f), "feed_forward"),
                                           stage("down", returned("down", f), "feed_forward")], "_ffn")
    projection = None
    if layer == 0 and isinstance(encoder.embedding_projection, nn.Linear):  # ALBERT's E -> H, before the first layer
        projection = {"embedding": rounded(read("projection", 0)), **stage("projection", returned("projection", 0))}
    return {"position": position, "layer": layer, "layers": config.num_layers, "heads": config.num_heads,
            "head_dim": config.head_dim, "norm": config.norm, "token": session.tokenizer.piece(int(ids[0, position])),
            "tokens": [session.tokenizer.piece(int(i)) for i in ids[0]], "activation": config.activation,
            "shared": {"attention": len(encoder.attention) < config.num_layers,
                       "feed_forward": len(encoder.feed_forward) < config.num_layers},
            "projection": projection, "stages": stages, "output": stages[-1]["values"]}


def attention_stage(attention: nn.Module, call: tuple, context: torch.Tensor, position: int) -> dict:
    """The attention sublayer's inside at the token, per head: its query, key and value
    (SelfAttention.heads, turned by position where the model is rotary), its scores over the keys
    (what the softmax read), the probabilities, and the head's weighted sum of the values (its
    part of `context`, what SelfAttention.out read, as the forward computed it); and the key mask."""
    x, sequences = call[0][:2]  # what SelfAttention read: its input, and how the tokens form sequences
    with torch.no_grad():
        qkv = attention.heads(x, sequences.rotary)[0, position]  # [3, heads, d]
        with SoftmaxInputs() as softmax:
            probabilities = attention.probabilities(x, sequences)[0, :, position]  # [heads, keys]
    scores = softmax.inputs[-1][0, :, position]  # [heads, keys]
    d = attention.head_dim
    heads = [{"q": rounded(qkv[0, h]), "k": rounded(qkv[1, h]), "v": rounded(qkv[2, h]), "scores": rounded(scores[h]),
              "probs": rounded(probabilities[h]), "mix": rounded(context[h * d:(h + 1) * d])} for h in range(attention.num_heads)]
    keys = sequences.key_mask[0].tolist() if sequences.key_mask is not None else [True] * x.shape[1]
    code = {part: code_line(*STAGES[part]) for part in ("qkv", "scores", "mask", "softmax")}
    code["mix"] = code_line(*STAGES["mix_sdpa" if attention.backend == "sdpa" else "mix_naive"])
    if sequences.rotary is not None:
        code["rotary"] = code_line(*STAGES["rotary"])
    return {"id": "attention", "heads": heads, "real_keys": keys, "rotary": sequences.rotary is not None,
            "scale": d ** -0.5, "code": code}
