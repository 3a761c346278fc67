"""A pretraining run, from settings to a saved model: what `python train.py` does, in order.

    check the settings and the architecture          (fail in milliseconds, not after an hour)
    join the process group (under torchrun)
    claim OUT (lock; refuse to clobber a checkpoint)
    teacher (DistilBERT) -> data: tokenizer + batch streams -> model + objectives -> AdamW
    --init: weights, architecture and tokenizer from a saved model (init_from.py)
    --resume: weights, optimizer, step, RNG and data position from the newest intact checkpoint
    the loop (loop.py), checkpoints along the way, the kept model in OUT

One process (the default) or many: every process runs this; only rank 0 writes files.
Each process reads `grad_accum` batch streams — one per micro-step — out of
world_size × grad_accum disjoint shards, so the same global batch is split the same way
whether the micro-steps run one after another or side by side on several processes.
"""

from __future__ import annotations

import errno
import itertools
import json
import os
from contextlib import contextmanager, nullcontext
from pathlib import Path

import torch

from ..corpus.pipeline import build_pretraining_data
from ..corpus.baselines import mlm_baselines
from ..corpus.documents import corpus_files
from ..corpus.cache import DEFAULT_DATA_DIR
from ..corpus.cost import size
from ..corpus.pipeline import plan_corpus
from ..data.static_masks import STATIC_DUPE_FACTOR
from ..operations.files import write_atomic
from ..pretrained import from_pretrained, save_pretrained
from ..variants import Variant, build_pretrainer, get_variant, run_architecture, with_layout
from ..operations import distributed
from ..operations.checkpoint import Checkpoints
from ..operations.distributed import Distributed
from ..operations.errors import TrainingError, warn
from .init_from import Start, load_start
from ..training.loop import Progress, train
from ..training.optimizer import build_optimizer
from .metrics import MetricsLog
from .phases import continue_run
from .plan import describe_plan, device_peak, time_step
from .tensorboard import check_installed, report_to

from ..operations.outdir import GENERATOR_DIR, LAUNCHED_FROM, RUN_FILE, OutputDir
from ..operations.precision import Precision, auto_line, resolve as resolve_precision
from .curves import RunPicture
from .levers import use_levers
from .report import HeldOutReport, band_for, differences
from .resolved import describe_run
from .resume import check_same_run, restore, training_state
from ..training.settings import LoopSettings, Settings
from ..operations.state import rng_state, seed_everything
from ..corpus import fingerprint
from ..tokenizers import has_tokenizer
from ..tokenizers.load import tokenizer_file_names

TEACHER_HINT = "train one first with `python train.py --variant bert --out checkpoints/bert`, then pass --teacher checkpoints/bert"


def pretrain(settings: Settings, model_overrides: dict | None = None, *, resume: bool = False, overwrite: bool = False) -> Path:
    """Train `settings.variant`; returns OUT, which `minibert.from_pretrained` loads."""
    model_overrides = dict(model_overrides or {})
    variant = get_variant(settings.variant)
    settings = with_default_out(settings)
    settings.check()
    if settings.report_to == "tensorboard":
        check_installed()  # before OUT is claimed: one line naming the extra
    settings = with_layout(variant, settings)  # the examples the run's objectives need
    streams_total = int(os.environ.get("WORLD_SIZE", "1")) * settings.grad_accum
    if settings.batch_size % streams_total:
        raise ValueError(
            f"--batch-size {settings.batch_size} cannot be split into {streams_total} equal micro-batches "
            f"(processes × --grad-accum); use a multiple of {streams_total}"
        )
    if variant.needs_teacher and settings.teacher is None:
        raise ValueError(f"the {variant.name} variant distils a teacher and none was given: {TEACHER_HINT}")
    # --init is read now, so that a wrong path or a checkpoint that cannot fit fails in seconds
    start = load_start(variant, settings, model_overrides) if settings.init or settings.init_generator else None
    if start is None and not variant.needs_teacher:
        run_architecture(variant, settings, model_overrides)  # an impossible architecture fails now
    if settings.data:
        corpus_files(settings.data)  # a mistyped path fails now
    if settings.tokenizer:
        check_tokenizer_flag(variant, settings)

    dist = distributed.setup(settings.device, settings.dist_timeout)
    try:
        device = dist.device(settings.device)
        resolve_precision(settings.precision, device, pretraining=True)  # fp16 on a CPU fails now, before the data is built
        chose = auto_line(settings.precision, device, pretraining=True)  # auto on a CPU with native bf16: said, with the reason
        if chose and dist.is_main:
            print(chose, flush=True)
        if settings.data:  # a corpus of one's own: what it will cost, before anything is written
            plan = corpus_cost(variant, settings, model_overrides, start)
            if dist.is_main:
                print(plan.line(), flush=True)
            plan.check_room(cache_dir(settings))
        if dist.is_main and not variant.needs_teacher:  # what the run will cost (plan.py; a distillation's: --plan)
            print(describe_plan(variant, settings, model_overrides), flush=True)
        out = OutputDir(settings.out, resume=resume, overwrite=overwrite) if dist.is_main else nullcontext()
        with out:
            dist.barrier()  # the other processes wait until rank 0 holds OUT
            result = _run(variant, settings, model_overrides, dist, device, resume, start)
            dist.barrier()  # and nobody tears the process group down while another still uses it
            return result
    finally:
        dist.close()


def asked_vocab_size(variant: Variant, model_overrides: dict) -> int:
    """The vocabulary a run asks of a new tokenizer: its --vocab-size, else its variant's."""
    return model_overrides.get("vocab_size", variant.model["vocab_size"])


def corpus_cost(variant: Variant, settings: Settings, model_overrides: dict, start: Start | None):
    """What building --data's corpus will cost, and whether it is cached (corpus/cost.py); reads, writes nothing."""
    return plan_corpus(settings.data, vocab_size=asked_vocab_size(variant, model_overrides),
                       masking=settings.masking, dupe_factor=dupe_factor(settings), mask_prob=settings.mask_prob,
                       data_dir=cache_dir(settings), tokenizer_dir=tokenizer_source(variant, settings, start),
                       text_field=settings.text_field, tokenizer_sentences=settings.tokenizer_sentences)


def with_default_out(settings: Settings) -> Settings:
    """OUT defaults to checkpoints/<variant>."""
    return settings.replace(out=settings.out or str(Path("checkpoints") / settings.variant))


def print_plan(settings: Settings, model_overrides: dict) -> None:
    """`--plan`: what the run would cost, printed before anything is built, written or locked."""
    variant, settings = get_variant(settings.variant), with_default_out(settings)
    settings.check()
    settings = with_layout(variant, settings)
    timed, build_seconds = None, 0.0
    if device_peak(settings.plan_for, settings.device)[1] is None and not (variant.needs_teacher or settings.init):
        config = run_architecture(variant, settings, model_overrides)  # no peak to divide by: time a step here
        threads = settings.threads or default_threads(config)
        timed = time_step(variant, settings, config, threads)  # within the memory available (plan.py)
        if settings.data:
            cost = corpus_cost(variant, settings, model_overrides, None)
            build_seconds = 0.0 if cost.cached else cost.seconds
    print(describe_plan(variant, settings, model_overrides, timed=timed, build_seconds=build_seconds))


def print_config(settings: Settings, model_overrides: dict) -> None:
    """`--print-config`: the resolved configuration block, without building anything."""
    variant, settings = get_variant(settings.variant), with_default_out(settings)
    settings.check()
    settings = with_layout(variant, settings)
    inherited = "--init" if settings.init else "teacher" if variant.needs_teacher else None
    config = None if inherited else run_architecture(variant, settings, model_overrides)
    print(describe_run(variant, settings, model_overrides, config, inherited=inherited))


def _run(variant: Variant, settings: Settings, model_overrides: dict, dist: Distributed, device, resume: bool,
         start: Start | None) -> Path:
    out = Path(settings.out)
    checkpoints = Checkpoints(out / "checkpoints", settings.keep)
    resuming = resume and bool(checkpoints.steps())
    if resume and not resuming and dist.is_main:
        warn(f"nothing to resume in {out} yet; starting from step 0")
    teacher = load_teacher(settings.teacher, settings.seq_len) if variant.needs_teacher else None

    vocab_size = asked_vocab_size(variant, model_overrides)
    tokenizer_dir = tokenizer_source(variant, settings, start)
    shards, eval_batches, tokenizer, baselines = build_batches(settings, dist, tokenizer_dir, vocab_size)
    config = start.config if start else run_architecture(variant, settings, model_overrides, vocab_size=tokenizer.vocab_size,
                                                     pad_token_id=tokenizer.pad_id, teacher=teacher.config if teacher else None)
    if dist.is_main:
        print(describe_run(variant, settings, model_overrides, config, tokenizer_known=True,
                           inherited="--init" if start else "teacher" if teacher else None), flush=True)
    torch.set_num_threads(settings.threads or default_threads(config))
    seed_everything(settings.seed)
    pretrainer = build_pretrainer(variant, settings, config, teacher, start.generator if start else None)
    if start and not resuming:
        loaded = start.load_into(pretrainer)
        if dist.is_main:
            print(loaded, flush=True)
    pretrainer = pretrainer.to(device)
    loop = LoopSettings.of(settings)  # what the loop and the optimizer read of this run
    optimizer = build_optimizer(pretrainer, lr=loop.lr, weight_decay=loop.weight_decay, optimizer=settings.optimizer,
                                betas=settings.adam_betas, eps=settings.adam_eps)
    amp = Precision.of(settings.precision, device, pretraining=True)  # its fp16 loss scale is part of a checkpoint
    progress, log = Progress(), MetricsLog(out / "metrics.jsonl")
    record = {"settings": settings.to_dict(), "model_overrides": model_overrides, "config": config.to_dict()}

    if resuming:
        check_same_run(out / RUN_FILE, record)
        state, path = checkpoints.load()
        progress = restore(state, pretrainer, optimizer, amp, shards, dist)
        if dist.is_main:
            log.keep_until(progress.step)
            print(f"resuming {variant.name} from {path} (step {progress.step})", flush=True)
    elif settings.continue_from:  # a second phase: the first's weights, optimizer and step (phases.py)
        progress, line = continue_run(settings.continue_from, pretrainer, optimizer, amp)
        if dist.is_main:
            print(line, flush=True)
    if not resuming and dist.is_main:
        # where the run was launched from, so that a relative path in its settings (--teacher
        # checkpoints/bert) can be found again from another folder (explore's session.py)
        write_atomic(out / RUN_FILE, json.dumps({**record, LAUNCHED_FROM: os.getcwd()}, indent=2) + "\n")
        print(f"  saved in {out / RUN_FILE}", flush=True)
        if tokenizer_dir != out:
            tokenizer.save(out)  # a teacher's or --init's vocabulary: keep it beside the model that reads it

    # held against the variant's default run where it was measured as that one was (report.py)
    changed = differences(variant, settings, model_overrides)
    band, no_band = band_for(variant, settings, model_overrides, config.vocab_size)
    if dist.is_main and no_band:
        print(f"no default band to hold this run against: {no_band}", flush=True)
    picture = RunPicture(out, f"python train.py --variant {variant.name} {' '.join(changed)}".strip())

    def save(progress: Progress) -> None:
        mine = {"rng": rng_state(), "data": [shard.state_dict() for shard in shards]}
        ranks = dist.gather(mine)
        if dist.is_main:
            with disk_full_is_one_line(progress, checkpoints, pretrainer):
                checkpoints.save(progress.step, training_state(progress, pretrainer, optimizer, amp, ranks))
                save_pretrained(pretrainer.model, out)  # the kept model, loadable with from_pretrained(OUT)
                if "rtd" in pretrainer.objectives:  # ELECTRA's generator too, so that a later run can --init-generator it
                    save_pretrained(pretrainer.objectives["rtd"].generator, out / GENERATOR_DIR, tokenizer=tokenizer)
                picture.draw()  # OUT/curves.png, from metrics.jsonl

    micro_batches = [iter(shard) for shard in shards]  # one batch iterator per micro-step
    log = report_to(settings.report_to, log, out, progress.step) if dist.is_main else log  # --report-to tensorboard
    use_levers(pretrainer, compile=settings.compile, checkpoint_activations=settings.checkpoint_activations)
    last = train(pretrainer, optimizer, micro_batches, eval_batches, loop, progress, dist=dist, device=device, amp=amp, log=log,
                 report=HeldOutReport(baselines, band, changed), save=save)
    if dist.is_main:
        scores = ", ".join(f"{k} {v:.3f}" for k, v in {**last, **baselines}.items()
                           if k.startswith(("eval_", "baseline_")) and k.endswith(("accuracy", "auc")))
        print(f"done: {variant.name}, {progress.step} steps in {progress.elapsed:.0f}s{f' ({scores})' if scores else ''}; "
              f"load it with minibert.from_pretrained({str(out)!r}, head={variant.head!r})", flush=True)
        print(f"watch it act on text: python -m minibert explore {out}", flush=True)
    return out


def tokenizer_source(variant: Variant, settings: Settings, start: Start | None) -> Path:
    """Where the run's vocabulary comes from: the teacher's (DistilBERT), the --init checkpoint's,
    --tokenizer's, the first phase's (--continue-from), or OUT (trained on the corpus and saved there,
    or found there on --resume)."""
    if variant.needs_teacher:
        return Path(settings.teacher)
    return start.directory if start else Path(settings.tokenizer or settings.continue_from or settings.out)


def check_tokenizer_flag(variant: Variant, settings: Settings) -> None:
    """--tokenizer DIR: a folder with a tokenizer, in a run that does not take another's."""
    if variant.needs_teacher or settings.init:
        raise ValueError(f"--tokenizer cannot be combined with {'--init' if settings.init else 'a teacher'}, whose "
                         f"vocabulary the model must read; leave --tokenizer out")
    if not Path(settings.tokenizer).is_dir() or not has_tokenizer(settings.tokenizer):
        names = ", ".join(tokenizer_file_names()[:6])
        raise ValueError(f"--tokenizer {settings.tokenizer} holds no tokenizer (one of {names}, ...); pass a folder "
                         f"with one, e.g. a finished run's --out")


def cache_dir(settings: Settings) -> Path:
    return Path(settings.cache_dir) if settings.cache_dir else DEFAULT_DATA_DIR


def dupe_factor(settings: Settings) -> int:
    """Differently-masked copies of the corpus: --dupe-factor, or BERT's 10 under static masking."""
    return settings.dupe_factor or (STATIC_DUPE_FACTOR if settings.masking == "static" else 1)


def default_threads(config) -> int:
    """CPU threads per process. Threads split each matrix product; for narrow models (the
    default runs) the products are so small that waiting for each other costs more than
    the split saves, and on a busy machine every parallel op waits for its slowest thread
    (docs/training.md has the measurement)."""
    if config.hidden_size < 512:
        return 1
    return max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", "1")))


def build_batches(settings: Settings, dist: Distributed, tokenizer_dir: Path, vocab_size: int):
    """This process's `grad_accum` training shards, the held-out batches (rank 0), the
    tokenizer, and (rank 0) what the baselines score on the held-out batches.

    Rank 0 builds (or reuses) the tokenizer and the tokenized corpus first; the others then
    find them in the cache, so no two processes write the same file.
    """
    streams_total = dist.world_size * settings.grad_accum
    common = data_settings(settings, tokenizer_dir, vocab_size, batch_size=settings.batch_size // streams_total)
    if not dist.is_main:
        if dist.rank == 1:
            print(f"processes 1-{dist.world_size - 1} wait for rank 0 to build or check the data cache (up to "
                  f"--dist-timeout {settings.dist_timeout} s; raise it for a large corpus)", flush=True)
        dist.barrier()
        fingerprint.remember(dist.gather(None)[0])  # the corpus's key, computed once, by rank 0
    shards = [build_pretraining_data(settings.data, **common, rank=dist.rank * settings.grad_accum + i, world_size=streams_total)
              for i in range(settings.grad_accum)]
    if dist.is_main:
        dist.barrier()
        dist.gather(fingerprint.known())
    first = shards[0]
    eval_batches, baselines = None, {}
    if dist.is_main:
        whole = first if streams_total == 1 else build_pretraining_data(settings.data, **{**common, "rank": 0, "world_size": 1})
        eval_batches = whole.eval
        if eval_batches is not None:
            baselines = mlm_baselines(whole.baseline_counts(), itertools.islice(eval_batches, settings.eval_batches),
                                      unknown_ids=whole.tokenizer.special_ids)
    return [shard.train for shard in shards], eval_batches, first.tokenizer, baselines


def data_settings(settings: Settings, tokenizer_dir: Path, vocab_size: int, batch_size: int) -> dict:
    """What `build_pretraining_data` is asked for a run, the corpus paths aside: the run's
    data settings (also what `python -m minibert explore` rebuilds a finished run's batches with)."""
    return dict(
        tokenizer_dir=tokenizer_dir, vocab_size=vocab_size, data_dir=cache_dir(settings),
        seq_len=settings.seq_len, layout=settings.layout, masking=settings.masking, dupe_factor=dupe_factor(settings),
        mask_prob=settings.mask_prob, replace_probs=tuple(settings.replace_probs), whole_word=settings.whole_word,
        max_span=settings.max_span, short_seq_prob=settings.short_seq_prob, seed=settings.seed, mask_count=settings.mask_count,
        max_predictions=settings.max_predictions, mask_smoothing=settings.mask_smoothing,
        batch_size=batch_size, text_field=settings.text_field, tokenizer_sentences=settings.tokenizer_sentences,
    )


@contextmanager
def disk_full_is_one_line(progress: Progress, checkpoints: Checkpoints, pretrainer):
    """A save that meets a full disk ends the run in one line: the step it could not save, what
    a checkpoint takes, and the last good one to --resume from (every write is atomic, so the
    earlier checkpoints and the kept model are intact)."""
    try:
        yield
    except Exception as error:  # OSError, or safetensors' own error around one
        if getattr(error, "errno", None) != errno.ENOSPC and "No space left on device" not in str(error):
            raise
        saved = checkpoints.steps()
        # weights and AdamW's two moments in the checkpoint, the weights again as the kept model
        needs = folder_bytes(saved[0]) if saved else 16 * sum(p.numel() for p in pretrainer.parameters() if p.requires_grad)
        last = f"the last good one is {saved[0]}: free some space and rerun with --resume" if saved else \
            "none was saved yet: free some space and run again"
        raise TrainingError(f"no space left on the disk while saving step {progress.step} (a checkpoint takes about "
                            f"{size(needs)}); {last}") from None


def folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def load_teacher(path: str, seq_len: int):
    """DistilBERT's teacher: any checkpoint with an MLM head, and the vocabulary it reads."""
    from ..tokenizers import load_tokenizer

    if not Path(path).is_dir():
        raise FileNotFoundError(f"--teacher {path} is not a directory; {TEACHER_HINT}")
    try:
        teacher = from_pretrained(path, head="mlm")
        tokenizer = load_tokenizer(path)
    except (ValueError, FileNotFoundError) as error:
        raise type(error)(f"--teacher {path}: {error}") from None
    if tokenizer.vocab_size != teacher.config.vocab_size:
        raise ValueError(
            f"--teacher {path}: its tokenizer has {tokenizer.vocab_size} tokens but its model {teacher.config.vocab_size}; "
            f"the student reads the teacher's vocabulary, so they must match — use a consistent checkpoint"
        )
    if seq_len > teacher.config.max_length:
        raise ValueError(f"--seq-len {seq_len} exceeds the teacher's {teacher.config.max_length} positions; lower --seq-len")
    return teacher
