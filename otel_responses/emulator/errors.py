"""API errors in the real Responses API's shape, so the openai SDK raises its typed exceptions."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An error the emulator answers with instead of a result; carries the HTTP status."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        type_: str = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.type = type_

    def body(self) -> dict[str, Any]:
        """The JSON body: `{"error": {message, type, param, code}}` like api.openai.com."""
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


def bad_request(message: str, *, param: str | None = None, code: str | None = None) -> ApiError:
    """A 400, which the SDK turns into `openai.BadRequestError`."""
    return ApiError(400, message, param=param, code=code)


def not_found(message: str, *, param: str | None = None, code: str | None = None) -> ApiError:
    """A 404, which the SDK turns into `openai.NotFoundError`."""
    return ApiError(404, message, param=param, code=code)


def item_not_found(item_id: str) -> ApiError:
    """The real API's answer to a reference to an item it never persisted."""
    return not_found(
        f"Item with id '{item_id}' not found. Items are not persisted when `store` is set to false. "
        "Try again with `store` set to true, or remove this item from your input.",
        param="input",
    )
