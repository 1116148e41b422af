"""The commands that use the trained models (lmforge.inference): ``generate``, ``fill-mask``,
``embed``, ``predict`` and ``export``. MODEL is a model folder, its run folder, or an
architecture name (with ``--task``, its fine-tuned model)."""

from __future__ import annotations

import json

import click

from .options import _params, params_option, set_option, user_errors


def _model_options(command):
    """``--task``, ``--params`` and ``--set``: which model an architecture name means."""
    command = set_option()(command)
    command = params_option(help="Parameters file (for train.output when MODEL is an architecture name).")(command)
    return click.option("--task", help="With an architecture name: its model fine-tuned on this task.")(command)


def _load(model: str, task: str | None, params_path: str, overrides: list[str], *, output: str | None = None,
          inputs: tuple = ()):
    """The model a command names, loaded; errors are one line. With ``output`` (what the command
    writes), that path is checked first (``artifacts.check_output``): never the model folder,
    one of ``inputs``, the project, home or root folder, before any weight is read."""
    from pathlib import Path

    from ..artifacts import check_output
    from ..inference.loading import load, model_folder

    train_output = "models"
    if Path(params_path).exists() or overrides:
        train_output = _params(params_path, overrides).train.output
    if output is not None:
        check_output(output, inputs=(model_folder(model, train_output=train_output, task=task), *inputs))
    return load(model, train_output=train_output, task=task)


def _inputs(text: str | None, file: str | None):
    from ..inference.texts import read_inputs

    return read_inputs(text, file)


@click.command()
@click.argument("model")
@click.argument("prompt", required=False)
@click.option("--file", "file", type=click.Path(), help="Prompts, one per line.")
@click.option("--max-new-tokens", type=int, default=40, show_default=True)
@click.option("--beams", type=int, default=1, show_default=True, help="Beam search with this many beams (1: greedy or sampling).")
@click.option("--sample", is_flag=True, help="Draw each token from the distribution instead of taking the most likely.")
@click.option("--temperature", type=float, default=1.0, show_default=True)
@click.option("--top-k", type=int, default=0, show_default=True, help="Sample from the k most likely tokens (0: all).")
@click.option("--top-p", type=float, default=1.0, show_default=True, help="Sample from the smallest set holding this probability.")
@click.option("--repetition-penalty", type=float, default=1.0, show_default=True)
@click.option("--length-penalty", type=float, default=1.0, show_default=True, help="Beam search: exponent of the length normalisation.")
@click.option("--seed", type=int, default=0, show_default=True)
@_model_options
def generate(model, prompt, file, max_new_tokens, beams, sample, temperature, top_k, top_p, repetition_penalty,
             length_penalty, seed, task, params_path, overrides) -> None:
    """Write text after PROMPT (or each line of --file, or of standard input with "-") with a model that
    generates: GPT, Transformer-XL, XLNet, BART, T5, Switch. Tokens are printed as they come.

    \b
    Example: lmforge generate gpt "Return the" --sample --top-p 0.9 --seed 1

    MODEL: a model folder (models/gpt/pretrain/model), its run folder, or an architecture name (its
    pretrained model under train.output; with --task, its fine-tuned one).
    """
    from ..inference.generate import Settings, check_generator, generate_text
    from ..inference.sampling import Sampling

    with user_errors():
        loaded = _load(model, task, params_path, list(overrides))
        check_generator(loaded)
        settings = Settings(max_new_tokens, beams, Sampling(sample, temperature, top_k, top_p, repetition_penalty), seed,
                            length_penalty)
        prompts, _ = _inputs(prompt, file)
        for text in prompts:
            generate_text(loaded, text, settings, on_text=lambda piece: click.echo(piece, nl=False))
            click.echo()


@click.command("fill-mask")
@click.argument("model")
@click.argument("text", required=False)
@click.option("--file", "file", type=click.Path(), help="Texts, one per line.")
@click.option("--top-k", type=int, default=5, show_default=True, help="Candidates shown per blank (BERT, ALBERT, ERNIE).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per text.")
@_model_options
def fill_mask_command(model, text, file, top_k, as_json, task, params_path, overrides) -> None:
    """Fill the blanks of TEXT: [MASK] (or the model's own mask token) for BERT, ALBERT, ERNIE and
    BART, <extra_id_0>, <extra_id_1>, ... (or <mask>) for T5 and Switch.

    \b
    Example: lmforge fill-mask bert "Return the [MASK] of the parser."

    MODEL: a model folder (models/gpt/pretrain/model), its run folder, or an architecture name (its
    pretrained model under train.output; with --task, its fine-tuned one).
    """
    from ..inference.fill_mask import fill_mask

    with user_errors():
        loaded = _load(model, task, params_path, list(overrides))
        texts, _ = _inputs(text, file)
        for t in texts:
            filled = fill_mask(loaded, t, top_k=top_k)
            if as_json:
                click.echo(json.dumps({"text": t, "sequence": filled.sequence, "blanks": filled.blanks}))
                continue
            click.echo(filled.sequence)
            for i, candidates in enumerate(filled.blanks, 1):
                shown = ", ".join(c["token_str"] if c["score"] is None else f"{c['token_str']!r} {c['score']:.3f}"
                                  for c in candidates)
                click.echo(f"  blank {i}: {shown}")


@click.command()
@click.argument("model")
@click.argument("text", required=False)
@click.option("--file", "file", type=click.Path(), help="Texts: one per line, or a .csv/.tsv/.jsonl with a text column.")
@click.option("--output", "-o", required=True, type=click.Path(), help=".npy (one vector per text) or .parquet (any level).")
@click.option("--level", type=click.Choice(["text", "word", "token"]), default="text", show_default=True)
@click.option("--pooling", type=click.Choice(["mean", "cls", "last"]), default="mean", show_default=True,
              help="A text's vector: the mean of its tokens', the [CLS] token's, or the last token's.")
@click.option("--mix", type=click.Choice(["top", "uniform", "learned"]), default="top", show_default=True,
              help="ELMo: its top layer, the layers' mean, or a fine-tuned model's learned scalar mix.")
@click.option("--batch-size", type=int, default=32, show_default=True)
@_model_options
def embed(model, text, file, output, level, pooling, mix, batch_size, task, params_path, overrides) -> None:
    """Contextual vectors of TEXT (or --file, or standard input with "-") from any trained model.

    \b
    Example: lmforge embed bert --file sentences.txt --level word -o words.parquet

    MODEL: a model folder (models/gpt/pretrain/model), its run folder, or an architecture name (its
    pretrained model under train.output; with --task, its fine-tuned one).
    """
    from ..inference.embed import embed as run_embed, write
    from ..progress import Progress

    with user_errors():
        loaded = _load(model, task, params_path, list(overrides), output=output, inputs=(file,))
        texts, _ = _inputs(text, file)
        with Progress(len(texts), "embed", "texts") as bar:
            done = run_embed(loaded, texts, level=level, pooling=pooling, mix=mix, batch_size=batch_size,
                             progress=bar.update)
        write(done, texts, output, level)
    rows = sum(len(v) for v in done.vectors)
    click.echo(f"embed: {rows} vectors of {done.vectors[0].shape[-1]} for {len(texts)} texts -> {output}")


@click.command()
@click.argument("model")
@click.argument("text", required=False)
@click.option("--pair", help="The second text, for a model fine-tuned on pairs.")
@click.option("--file", "file", type=click.Path(), help="Texts: one per line, or .csv/.tsv/.jsonl with a text (and text_pair) column.")
@click.option("--output", "-o", type=click.Path(), help="Write .csv or .jsonl (text, label, score, one column per label).")
@click.option("--batch-size", type=int, default=32, show_default=True)
@_model_options
def predict(model, text, pair, file, output, batch_size, task, params_path, overrides) -> None:
    """Label TEXT (or --file, or standard input with "-") with a fine-tuned model: the label and its
    probability, one tab-separated line per text.

    \b
    Example: lmforge predict bert --task docstring_kind "Return the parsed value."

    MODEL: a model folder (models/gpt/pretrain/model), its run folder, or an architecture name (its
    pretrained model under train.output; with --task, its fine-tuned one).
    """
    from ..inference.predict import predict as run_predict
    from ..inference.texts import write_predictions

    with user_errors():
        loaded = _load(model, task, params_path, list(overrides), output=output, inputs=(file,))
        texts, pairs = _inputs(text, file)
        if pair is not None:
            pairs = [pair] * len(texts)
        results = run_predict(loaded, texts, pairs, batch_size=batch_size)
        rows = [{"text": t, "label": r.label, "score": r.score, **{f"p_{k}": v for k, v in r.scores.items()}}
                for t, r in zip(texts, results)]
        printed = write_predictions(rows, output)
    click.echo(printed if printed is not None else f"predict: {len(rows)} rows -> {output}")


@click.command()
@click.argument("model")
@click.argument("out_dir", type=click.Path())
@_model_options
@click.option("--format", "fmt", type=click.Choice(["safetensors", "onnx"]), default="safetensors", show_default=True,
              help="safetensors: a transformers folder; onnx: model.onnx (not ELMo, not Switch).")
def export(model, out_dir, task, params_path, overrides, fmt) -> None:
    """Write MODEL as a transformers folder OUT_DIR (config, safetensors weights, tokenizer, README.md)
    that AutoModel* and pipeline() load; with --format onnx, as model.onnx (input ids and mask to
    logits, any batch and length) with the same tokenizer and README.md.

    \b
    Example: lmforge export bert --task docstring_kind exported/bert-docstring
             lmforge export gpt exported/gpt-onnx --format onnx

    MODEL: a model folder (models/gpt/pretrain/model), its run folder, or an architecture name (its
    pretrained model under train.output; with --task, its fine-tuned one).
    """
    from ..inference.export import export_model, export_onnx

    with user_errors():
        loaded = _load(model, task, params_path, list(overrides), output=out_dir)
        out = (export_onnx if fmt == "onnx" else export_model)(loaded, out_dir)
    click.echo(f"export: {out}")
