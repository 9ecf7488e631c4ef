"""A stub of the routes where serving stacks say a model's context window, each in its own dialect
(issue 40), for conformance/window.py's reading of them; nothing here generates:

- llama: llama-server's `GET /props` (`default_generation_settings.n_ctx`) and `GET /v1/models` with
  `meta.n_ctx_train` (the trained window, larger than the served one);
- llama-trained: only `meta.n_ctx_train` (an older llama-server without /props);
- ollama: `POST /api/show` with `num_ctx` in `parameters` and `model_info` `<arch>.context_length`;
- ollama-info: `/api/show` with `model_info` only;
- litellm: a gateway's `GET /model/info` (`model_info.max_input_tokens`);
- dynamo: `/v1/models` with `context_window: 0` (says nothing) and nothing else;
- sglang: `/v1/models` with `max_model_len`.

    python -m tests.conformance.window_dialects_server --port P --dialect NAME
"""

from __future__ import annotations

import argparse

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

MODEL = "stub/model"
DIALECTS = ("llama", "llama-trained", "ollama", "ollama-info", "litellm", "dynamo", "sglang")


def app(dialect: str) -> Starlette:
    def models(request: Request) -> Response:
        entry: dict = {"id": MODEL, "object": "model", "owned_by": "stub"}
        if dialect in ("llama", "llama-trained"):
            entry["meta"] = {"vocab_type": 2, "n_ctx_train": 131072, "n_params": 268098176}
        if dialect == "dynamo":
            entry["context_window"] = 0
        if dialect == "sglang":
            entry["max_model_len"] = 32768
        return JSONResponse({"object": "list", "data": [entry]})

    def props(request: Request) -> Response:
        if dialect != "llama":
            return JSONResponse({"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}}, 404)
        return JSONResponse({"default_generation_settings": {"n_ctx": 4096, "params": {"n_predict": -1}},
                             "total_slots": 1, "model_path": "/models/gemma.gguf"})

    async def show(request: Request) -> Response:
        body = await request.json()
        if not dialect.startswith("ollama") or body.get("model") != MODEL:
            return JSONResponse({"error": "model not found"}, 404)
        out: dict = {"model_info": {"general.architecture": "gemma3", "gemma3.context_length": 32768}}
        if dialect == "ollama":
            out["parameters"] = "stop                           \"<end_of_turn>\"\nnum_ctx                        8192"
        return JSONResponse(out)

    def info(request: Request) -> Response:
        if dialect != "litellm":
            return JSONResponse({"detail": "Not Found"}, 404)
        return JSONResponse({"data": [{"model_name": MODEL, "litellm_params": {"model": "openai/x"},
                                       "model_info": {"max_input_tokens": 16384, "max_output_tokens": 4096}}]})

    return Starlette(routes=[Route("/v1/models", models), Route("/props", props),
                             Route("/api/show", show, methods=["POST"]), Route("/model/info", info),
                             Route("/v1/model/info", info)])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--dialect", choices=DIALECTS, required=True)
    args = parser.parse_args()
    uvicorn.run(app(args.dialect), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
