"""goose: Llama-family GGUF models on the CPU with lossless speculative decoding, and goose's
drafter on its own for engines that verify its trees with their own model.

    import goose
    model = goose.Model("stories260K.gguf")
    print(model.generate("Once upon a time", max_tokens=24))             # plain decoding's text
    for piece in model.generate("Once upon a time", method="goose", stream=True):
        print(piece, end="")

A thin layer over the C API (include/goose/goose.h, through ctypes): errors are GooseError with
the library's status and message; objects free what they hold on close() or when collected.
"""
import ctypes
import queue
import threading
from dataclasses import dataclass, field
from typing import Iterator, List, Optional, Sequence

from ._lib import lib, SOURCE_NAMES, STATUS_NAMES, BUFFER_TOO_SMALL
from . import _lib as _c

__all__ = ["GooseError", "Model", "Session", "Drafter", "DraftRequest", "DraftTree",
           "ancestor_mask", "version"]


class GooseError(Exception):
    """A goose call failed: .status is its name ("GOOSE_ERROR_FILE", ...), the text goose's."""

    def __init__(self, code: int):
        self.code = code
        self.status = STATUS_NAMES.get(code, "unknown")
        super().__init__(f"{self.status}: {lib.goose_last_error().decode('utf-8', 'replace')}")


def _check(code: int) -> None:
    if code != 0:
        raise GooseError(code)


def _ints(values: Sequence[int]):
    return (ctypes.c_int32 * len(values))(*values)


def _floats(values: Sequence[float]):
    return (ctypes.c_float * len(values))(*values)


def version() -> str:
    return lib.goose_version().decode()


def _stats_dict(s: "_c.SpecStats") -> dict:
    per_source = {name: {"drafted": s.drafted[i], "reached": s.reached[i],
                         "accepted": s.accepted[i]}
                  for i, name in enumerate(SOURCE_NAMES) if i > 0}
    return {"cycles": s.cycles, "committed": s.committed, "bonus": s.bonus,
            "tree_nodes": s.tree_nodes, "sources": per_source}


def _generate_params(max_tokens, method, budget, temperature, top_k, top_p, seed, ignore_eos,
                     stop_tokens, prefill_chunk, prediction):
    p = _c.GenerateParams()
    lib.goose_generate_default_params(ctypes.byref(p))
    p.max_tokens = max_tokens
    p.method = method.encode()
    p.budget = -1 if budget == "auto" else int(budget)
    p.sampling.temperature = temperature
    p.sampling.top_k = top_k
    p.sampling.top_p = top_p
    p.sampling.seed = seed
    p.ignore_eos = int(bool(ignore_eos))
    stops = _ints(list(stop_tokens))
    p.stop_tokens = ctypes.cast(stops, _c.c_int32_p)
    p.n_stop_tokens = len(stop_tokens)
    if prefill_chunk is not None:
        p.prefill_chunk = prefill_chunk
    predicted = _ints(list(prediction))
    p.prediction = ctypes.cast(predicted, _c.c_int32_p)
    p.n_prediction = len(prediction)
    return p, (stops, predicted)  # (the arrays must live as long as p)


class Session:
    """A context (KV cache) on a model: generate, or score token trees row by row as an
    outside engine does (score / top_k / argmax / keep / truncate). One thread at a time."""

    def __init__(self, model: "Model", n_ctx: int = 0, n_threads: int = 0):
        self._model = model  # (keeps the model's handle alive as long as this session)
        p = _c.SessionParams(n_ctx=n_ctx, n_threads=n_threads)
        handle = ctypes.c_void_p()
        _check(lib.goose_session_open(model._handle, ctypes.byref(p), ctypes.byref(handle)))
        self._handle = handle

    def close(self) -> None:
        if getattr(self, "_handle", None):
            lib.goose_session_free(self._handle)
            self._handle = None

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def generate_tokens(self, prompt: Sequence[int], max_tokens: int = 128, *,
                        method: str = "none", budget=0, temperature: float = 0.0,
                        top_k: int = 40, top_p: float = 0.95, seed: int = 0,
                        ignore_eos: bool = False, stop_tokens: Sequence[int] = (),
                        prefill_chunk: Optional[int] = None, prediction: Sequence[int] = (),
                        on_text=None) -> List[int]:
        """The generated token ids. on_text(piece: bytes) is called as text commits; it may
        return False to stop. Keyword arguments as goose generate's flags (budget "auto";
        prediction: the expected output's token ids, without BOS)."""
        p, _keep = _generate_params(max_tokens, method, budget, temperature, top_k, top_p, seed,
                                    ignore_eos, stop_tokens, prefill_chunk, prediction)
        prompt_ids = _ints(list(prompt))

        def on_tokens(_user, _tokens, _n, text, length):
            try:
                if on_text is None:
                    return 1
                return 0 if on_text(ctypes.string_at(text, length)) is False else 1
            except BaseException:  # noqa: an exception in the callback stops the generation
                return 0

        callback = _c.TOKEN_CALLBACK(on_tokens)
        self.last_stats = _c.GenerateStats()
        _check(lib.goose_session_generate(self._handle, prompt_ids, len(prompt), ctypes.byref(p),
                                          callback, None, ctypes.byref(self.last_stats)))
        tokens = _c.c_int32_p()
        n = ctypes.c_int32()
        _check(lib.goose_session_tokens(self._handle, ctypes.byref(tokens), ctypes.byref(n)))
        return tokens[:n.value]

    def cancel(self) -> None:
        """Stops the running generation before its next pass (any thread)."""
        _check(lib.goose_session_cancel(self._handle))

    def stats(self) -> dict:
        s = _c.SpecStats()
        _check(lib.goose_session_stats(self._handle, ctypes.byref(s)))
        return _stats_dict(s)

    # Scoring: see goose.h, "Sessions: scoring trees".
    def score(self, tokens: Sequence[int], parents: Sequence[int]) -> None:
        _check(lib.goose_session_score(self._handle, _ints(tokens), _ints(parents), len(tokens)))

    def top_k(self, row: int, k: int):
        """([ids], [logits]) of the row's k highest logits, highest first."""
        ids, logits = (ctypes.c_int32 * k)(), (ctypes.c_float * k)()
        _check(lib.goose_session_top_k(self._handle, row, k, ids, logits))
        return list(ids), list(logits)

    def argmax(self, row: int) -> int:
        t = ctypes.c_int32()
        _check(lib.goose_session_argmax(self._handle, row, ctypes.byref(t)))
        return t.value

    def keep(self, path: Sequence[int]) -> None:
        _check(lib.goose_session_keep(self._handle, _ints(path), len(path)))

    def truncate(self, n_past: int) -> None:
        _check(lib.goose_session_truncate(self._handle, n_past))

    @property
    def n_past(self) -> int:
        n = ctypes.c_int32()
        _check(lib.goose_session_n_past(self._handle, ctypes.byref(n)))
        return n.value


class Model:
    """A loaded GGUF model. generate() runs on a session of its own, opened on first use."""

    def __init__(self, path: str, *, n_threads: int = 0, n_ctx: int = 0,
                 draft_model: Optional[str] = None, learned_cache: bool = False,
                 cache_dir: Optional[str] = None, budget_auto: bool = False):
        p = _c.ModelParams()
        lib.goose_model_default_params(ctypes.byref(p))
        p.n_threads, p.n_ctx = n_threads, n_ctx
        p.draft_model_path = draft_model.encode() if draft_model else None
        p.learned_cache = int(bool(learned_cache))
        p.cache_dir = cache_dir.encode() if cache_dir else None
        p.budget_auto = int(bool(budget_auto))
        handle = ctypes.c_void_p()
        _check(lib.goose_model_load(path.encode(), ctypes.byref(p), ctypes.byref(handle)))
        self._handle = handle
        self._session: Optional[Session] = None
        info = _c.ModelInfo()
        _check(lib.goose_model_info_get(self._handle, ctypes.byref(info)))
        self.n_vocab, self.n_ctx, self.bos, self.eos = info.n_vocab, info.n_ctx, info.bos, info.eos
        self.fingerprint = info.fingerprint

    def close(self) -> None:
        if getattr(self, "_session", None) is not None:
            self._session.close()
            self._session = None
        if getattr(self, "_handle", None):
            lib.goose_model_free(self._handle)
            self._handle = None

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def session(self, n_ctx: int = 0, n_threads: int = 0) -> Session:
        return Session(self, n_ctx, n_threads)

    def tokenize(self, text: str, add_bos: bool = True) -> List[int]:
        data = text.encode("utf-8")
        n = ctypes.c_int32()
        code = lib.goose_tokenize(self._handle, data, len(data), int(add_bos), None, 0,
                                  ctypes.byref(n))
        if code not in (0, BUFFER_TOO_SMALL):
            raise GooseError(code)
        ids = (ctypes.c_int32 * max(n.value, 1))()
        _check(lib.goose_tokenize(self._handle, data, len(data), int(add_bos), ids, n.value,
                                  ctypes.byref(n)))
        return list(ids[:n.value])

    def detokenize_bytes(self, tokens: Sequence[int]) -> bytes:
        ids = _ints(tokens)
        length = ctypes.c_size_t()
        code = lib.goose_detokenize(self._handle, ids, len(tokens), None, 0, ctypes.byref(length))
        if code not in (0, BUFFER_TOO_SMALL):
            raise GooseError(code)
        buf = ctypes.create_string_buffer(length.value + 1)
        _check(lib.goose_detokenize(self._handle, ids, len(tokens), buf, len(buf),
                                    ctypes.byref(length)))
        return buf.raw[:length.value]

    def detokenize(self, tokens: Sequence[int]) -> str:
        return self.detokenize_bytes(tokens).decode("utf-8", "replace")

    def is_eog(self, token: int) -> bool:
        flag = ctypes.c_int32()
        _check(lib.goose_token_is_eog(self._handle, token, ctypes.byref(flag)))
        return bool(flag.value)

    def generate(self, prompt: str, max_tokens: int = 128, *, stream: bool = False,
                 add_bos: bool = True, **options):
        """The generated text for `prompt` (what `goose generate` prints after the prompt), or
        with stream=True an iterator of text pieces as they commit (leaving it early stops the
        generation). options: method ("none", "goose", "pld", ...), budget (0: the method's,
        1..128, "auto"), temperature, top_k, top_p, seed, ignore_eos, stop_tokens,
        prefill_chunk, prediction (the text the output is expected to hold: OpenAI's Predicted
        Outputs; goose --prediction)."""
        if self._session is None:
            self._session = Session(self)
        ids = self.tokenize(prompt, add_bos)
        if isinstance(options.get("prediction"), str):
            options["prediction"] = self.tokenize(options["prediction"], add_bos=False)
        if stream:
            return self._stream(ids, max_tokens, options)
        tokens = self._session.generate_tokens(ids, max_tokens, **options)
        return self.detokenize(tokens)

    def _stream(self, ids, max_tokens, options) -> Iterator[str]:
        pieces: "queue.Queue" = queue.Queue()
        stop = threading.Event()
        done = object()
        failure = []

        def on_text(piece: bytes):
            pieces.put(piece)
            return not stop.is_set()

        def run():
            try:
                self._session.generate_tokens(ids, max_tokens, on_text=on_text, **options)
            except GooseError as e:
                failure.append(e)
            finally:
                pieces.put(done)

        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        try:
            while True:
                piece = pieces.get()
                if piece is done:
                    break
                yield piece.decode("utf-8", "replace")
            if failure:
                raise failure[0]
        finally:  # the caller left early: stop the generation and wait for it
            stop.set()
            worker.join()


@dataclass
class DraftTree:
    """A proposed tree: node 0 is the root (the last committed token), parents first."""
    tokens: List[int]
    parents: List[int]
    depth: List[int]
    source: List[str] = field(default_factory=list)


class DraftRequest:
    """One request of a Drafter (goose.h: the drafter on its own). One thread at a time."""

    def __init__(self, drafter: "Drafter", prompt: Sequence[int]):
        self._drafter = drafter
        handle = ctypes.c_void_p()
        _check(lib.goose_drafter_begin(drafter._handle, _ints(prompt), len(prompt),
                                       ctypes.byref(handle)))
        self._handle = handle

    def end(self) -> None:
        if getattr(self, "_handle", None):
            lib.goose_drafter_end(self._handle)
            self._handle = None

    def __del__(self):
        self.end()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.end()

    @staticmethod
    def _rows(top_ids: Sequence[Sequence[int]], top_logits: Sequence[Sequence[float]]):
        k = len(top_ids[0]) if top_ids else 0
        flat_ids = [i for row in top_ids for i in row]
        flat_logits = [x for row in top_logits for x in row]
        if any(len(row) != k for row in top_ids) or len(flat_logits) != len(flat_ids):
            raise ValueError("every row needs the same number of ids and logits")
        return _ints(flat_ids), _floats(flat_logits), k

    def observe_prompt(self, first_row: int, top_ids, top_logits) -> None:
        """The top-k (ids, logits) of prompt rows first_row, first_row + 1, ..."""
        ids, logits, k = self._rows(top_ids, top_logits)
        _check(lib.goose_drafter_observe_prompt(self._handle, first_row, len(top_ids), ids,
                                                logits, k))

    def set_prediction(self, tokens: Sequence[int]) -> None:
        """The request's expected output (token ids without BOS), before the first commit."""
        _check(lib.goose_drafter_set_prediction(self._handle, _ints(tokens), len(tokens)))

    def propose(self, budget: int) -> DraftTree:
        t = _c.DraftTree()
        _check(lib.goose_drafter_propose(self._handle, budget, ctypes.byref(t)))
        n = t.n_nodes
        return DraftTree(t.tokens[:n], t.parents[:n], t.depth[:n],
                         [SOURCE_NAMES[s] for s in t.source[:n]])

    def observe(self, top_ids, top_logits) -> None:
        """The top-k (ids, logits) of the tree's scored rows, row r = node r."""
        ids, logits, k = self._rows(top_ids, top_logits)
        _check(lib.goose_drafter_observe(self._handle, len(top_ids), ids, logits, k))

    def commit(self, accepted: Sequence[int], bonus: int) -> None:
        """The accepted nodes (root excluded) and the bonus token (-1: stopped in the path);
        with no tree open, the token the host decoded alone as bonus."""
        _check(lib.goose_drafter_commit(self._handle, _ints(accepted), len(accepted), bonus))

    def stats(self) -> dict:
        s = _c.SpecStats()
        _check(lib.goose_drafter_request_stats(self._handle, ctypes.byref(s)))
        return _stats_dict(s)


class Drafter:
    """goose's drafter without a model: trees for a host engine's requests, learning from the
    top-k the host reports. Shared by requests on any number of threads."""

    def __init__(self, n_vocab: int, method: str = "goose", model_fingerprint: int = 0):
        p = _c.DrafterParams(n_vocab=n_vocab, method=method.encode(),
                             model_fingerprint=model_fingerprint)
        handle = ctypes.c_void_p()
        _check(lib.goose_drafter_new(ctypes.byref(p), ctypes.byref(handle)))
        self._handle = handle
        info = _c.DrafterInfo()
        _check(lib.goose_drafter_info_get(self._handle, ctypes.byref(info)))
        self.n_vocab, self.top_k, self.method = info.n_vocab, info.top_k, info.method.decode()

    def close(self) -> None:
        if getattr(self, "_handle", None):
            _check(lib.goose_drafter_free(self._handle))
            self._handle = None

    def __del__(self):
        try:
            self.close()
        except GooseError:  # requests still open at exit: leave it to the process
            pass

    def begin(self, prompt: Sequence[int]) -> DraftRequest:
        return DraftRequest(self, prompt)

    def save(self, directory: str) -> None:
        _check(lib.goose_drafter_save(self._handle, directory.encode()))

    def load(self, directory: str) -> None:
        _check(lib.goose_drafter_load(self._handle, directory.encode()))

    def stats(self) -> dict:
        s = _c.SpecStats()
        _check(lib.goose_drafter_stats(self._handle, ctypes.byref(s)))
        return _stats_dict(s)


def ancestor_mask(parents: Sequence[int]) -> List[List[int]]:
    """mask[i][j] = 1 when j is i or an ancestor of i (what a host's tree attention takes)."""
    n = len(parents)
    mask = (ctypes.c_uint8 * (n * n))()
    _check(lib.goose_tree_ancestor_mask(_ints(parents), n, mask))
    return [list(mask[i * n:(i + 1) * n]) for i in range(n)]
