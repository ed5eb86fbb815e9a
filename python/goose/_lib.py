"""ctypes declarations of goose's C API (include/goose/goose.h), and where libgoose.so is.

The structures mirror the header field by field; tests/python checks them against the library.
"""
import ctypes
import os

try:
    from . import _paths  # written by cmake --install
except ImportError:  # the source tree: $GOOSE_LIBRARY or the loader's path
    _paths = None

c_int32_p = ctypes.POINTER(ctypes.c_int32)
c_float_p = ctypes.POINTER(ctypes.c_float)

SOURCE_COUNT = 8
SOURCE_NAMES = ("root", "spine", "branch", "chain", "draft", "graft_context", "graft_table",
                "prediction")

STATUS_NAMES = {
    0: "GOOSE_OK",
    1: "GOOSE_ERROR_INVALID_ARGUMENT",
    2: "GOOSE_ERROR_INVALID_HANDLE",
    3: "GOOSE_ERROR_FILE",
    4: "GOOSE_ERROR_STATE",
    5: "GOOSE_ERROR_OUT_OF_MEMORY",
    6: "GOOSE_ERROR_BUFFER_TOO_SMALL",
    7: "GOOSE_ERROR_INTERNAL",
}
BUFFER_TOO_SMALL = 6


class SpecStats(ctypes.Structure):
    _fields_ = [
        ("cycles", ctypes.c_int64),
        ("committed", ctypes.c_int64),
        ("bonus", ctypes.c_int64),
        ("tree_nodes", ctypes.c_int64),
        ("drafted", ctypes.c_int64 * SOURCE_COUNT),
        ("reached", ctypes.c_int64 * SOURCE_COUNT),
        ("accepted", ctypes.c_int64 * SOURCE_COUNT),
    ]


class ModelParams(ctypes.Structure):
    _fields_ = [
        ("n_threads", ctypes.c_int32),
        ("n_ctx", ctypes.c_int32),
        ("draft_model_path", ctypes.c_char_p),
        ("learned_cache", ctypes.c_int32),
        ("cache_dir", ctypes.c_char_p),
        ("budget_auto", ctypes.c_int32),
    ]


class ModelInfo(ctypes.Structure):
    _fields_ = [
        ("n_vocab", ctypes.c_int32),
        ("n_ctx_train", ctypes.c_int32),
        ("n_ctx", ctypes.c_int32),
        ("n_layer", ctypes.c_int32),
        ("n_embd", ctypes.c_int32),
        ("bos", ctypes.c_int32),
        ("eos", ctypes.c_int32),
        ("n_threads", ctypes.c_int32),
        ("fingerprint", ctypes.c_uint64),
    ]


class SessionParams(ctypes.Structure):
    _fields_ = [("n_ctx", ctypes.c_int32), ("n_threads", ctypes.c_int32)]


class Sampling(ctypes.Structure):
    _fields_ = [
        ("temperature", ctypes.c_float),
        ("top_k", ctypes.c_int32),
        ("top_p", ctypes.c_float),
        ("seed", ctypes.c_uint64),
    ]


class GenerateParams(ctypes.Structure):
    _fields_ = [
        ("max_tokens", ctypes.c_int32),
        ("sampling", Sampling),
        ("method", ctypes.c_char_p),
        ("budget", ctypes.c_int32),
        ("ignore_eos", ctypes.c_int32),
        ("stop_tokens", c_int32_p),
        ("n_stop_tokens", ctypes.c_int32),
        ("prefill_chunk", ctypes.c_int32),
        ("prediction", c_int32_p),
        ("n_prediction", ctypes.c_int32),
    ]


class GenerateStats(ctypes.Structure):
    _fields_ = [
        ("prompt_tokens", ctypes.c_int64),
        ("generated_tokens", ctypes.c_int64),
        ("forward_passes", ctypes.c_int64),
        ("mean_accepted_tokens", ctypes.c_double),
        ("prompt_seconds", ctypes.c_double),
        ("generation_seconds", ctypes.c_double),
        ("hit_context_limit", ctypes.c_int32),
        ("cancelled", ctypes.c_int32),
        ("spec", SpecStats),
    ]


class DrafterParams(ctypes.Structure):
    _fields_ = [
        ("n_vocab", ctypes.c_int32),
        ("method", ctypes.c_char_p),
        ("model_fingerprint", ctypes.c_uint64),
    ]


class DrafterInfo(ctypes.Structure):
    _fields_ = [
        ("n_vocab", ctypes.c_int32),
        ("top_k", ctypes.c_int32),
        ("open_requests", ctypes.c_int32),
        ("method", ctypes.c_char * 64),
    ]


class DraftTree(ctypes.Structure):
    _fields_ = [
        ("n_nodes", ctypes.c_int32),
        ("tokens", c_int32_p),
        ("parents", c_int32_p),
        ("depth", c_int32_p),
        ("source", ctypes.POINTER(ctypes.c_uint8)),
    ]


TOKEN_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, c_int32_p, ctypes.c_int32,
                                  ctypes.POINTER(ctypes.c_char), ctypes.c_size_t)

_P = ctypes.c_void_p  # every handle
_S = ctypes.c_int     # goose_status
_SIGNATURES = {
    "goose_status_name": (ctypes.c_char_p, [ctypes.c_int]),
    "goose_last_error": (ctypes.c_char_p, []),
    "goose_version": (ctypes.c_char_p, []),
    "goose_model_default_params": (None, [ctypes.POINTER(ModelParams)]),
    "goose_model_load": (_S, [ctypes.c_char_p, ctypes.POINTER(ModelParams),
                              ctypes.POINTER(_P)]),
    "goose_model_free": (_S, [_P]),
    "goose_model_info_get": (_S, [_P, ctypes.POINTER(ModelInfo)]),
    "goose_token_is_eog": (_S, [_P, ctypes.c_int32, c_int32_p]),
    "goose_tokenize": (_S, [_P, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int32, c_int32_p,
                            ctypes.c_int32, c_int32_p]),
    "goose_detokenize": (_S, [_P, c_int32_p, ctypes.c_int32, ctypes.c_char_p, ctypes.c_size_t,
                              ctypes.POINTER(ctypes.c_size_t)]),
    "goose_session_default_params": (None, [ctypes.POINTER(SessionParams)]),
    "goose_session_open": (_S, [_P, ctypes.POINTER(SessionParams), ctypes.POINTER(_P)]),
    "goose_session_free": (_S, [_P]),
    "goose_generate_default_params": (None, [ctypes.POINTER(GenerateParams)]),
    "goose_session_generate": (_S, [_P, c_int32_p, ctypes.c_int32,
                                    ctypes.POINTER(GenerateParams), TOKEN_CALLBACK,
                                    ctypes.c_void_p, ctypes.POINTER(GenerateStats)]),
    "goose_session_tokens": (_S, [_P, ctypes.POINTER(c_int32_p), c_int32_p]),
    "goose_session_cancel": (_S, [_P]),
    "goose_session_stats": (_S, [_P, ctypes.POINTER(SpecStats)]),
    "goose_session_score": (_S, [_P, c_int32_p, c_int32_p, ctypes.c_int32]),
    "goose_session_top_k": (_S, [_P, ctypes.c_int32, ctypes.c_int32, c_int32_p, c_float_p]),
    "goose_session_argmax": (_S, [_P, ctypes.c_int32, c_int32_p]),
    "goose_session_sample": (_S, [_P, ctypes.c_int32, ctypes.POINTER(Sampling), ctypes.c_int64,
                                  c_int32_p]),
    "goose_session_keep": (_S, [_P, c_int32_p, ctypes.c_int32]),
    "goose_session_truncate": (_S, [_P, ctypes.c_int32]),
    "goose_session_n_past": (_S, [_P, c_int32_p]),
    "goose_drafter_default_params": (None, [ctypes.POINTER(DrafterParams)]),
    "goose_drafter_new": (_S, [ctypes.POINTER(DrafterParams), ctypes.POINTER(_P)]),
    "goose_drafter_free": (_S, [_P]),
    "goose_drafter_info_get": (_S, [_P, ctypes.POINTER(DrafterInfo)]),
    "goose_drafter_begin": (_S, [_P, c_int32_p, ctypes.c_int32, ctypes.POINTER(_P)]),
    "goose_drafter_end": (_S, [_P]),
    "goose_drafter_observe_prompt": (_S, [_P, ctypes.c_int32, ctypes.c_int32, c_int32_p,
                                          c_float_p, ctypes.c_int32]),
    "goose_drafter_set_prediction": (_S, [_P, c_int32_p, ctypes.c_int32]),
    "goose_drafter_propose": (_S, [_P, ctypes.c_int32, ctypes.POINTER(DraftTree)]),
    "goose_drafter_observe": (_S, [_P, ctypes.c_int32, c_int32_p, c_float_p, ctypes.c_int32]),
    "goose_drafter_commit": (_S, [_P, c_int32_p, ctypes.c_int32, ctypes.c_int32]),
    "goose_drafter_request_stats": (_S, [_P, ctypes.POINTER(SpecStats)]),
    "goose_drafter_stats": (_S, [_P, ctypes.POINTER(SpecStats)]),
    "goose_drafter_save": (_S, [_P, ctypes.c_char_p]),
    "goose_drafter_load": (_S, [_P, ctypes.c_char_p]),
    "goose_tree_ancestor_mask": (_S, [c_int32_p, ctypes.c_int32,
                                      ctypes.POINTER(ctypes.c_uint8)]),
}


def _candidates():
    """Where libgoose.so may be: $GOOSE_LIBRARY, beside the installed package, the loader's."""
    env = os.environ.get("GOOSE_LIBRARY")
    if env:
        yield env
    if _paths is not None:
        here = os.path.dirname(os.path.abspath(__file__))
        yield os.path.normpath(os.path.join(here, _paths.LIBRARY_DIR_FROM_PACKAGE,
                                            _paths.LIBRARY_SONAME))
    yield "libgoose.so.0"


def load():
    errors = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
            break
        except OSError as e:
            errors.append(f"{path}: {e}")
    else:
        raise OSError("cannot load libgoose: " + "; ".join(errors) +
                      " (set GOOSE_LIBRARY to the library's path)")
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


lib = load()
