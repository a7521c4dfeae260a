"""A Django view that receives herenow's webhooks.

::

    # urls.py
    from herenow.django.webhooks import webhook_view

    def on_presence(batch, request):          # a herenow.webhooks.WebhookBatch
        for event in batch.events:
            if event.type == "join":
                ...

    urlpatterns = [path("hooks/presence", webhook_view(on_presence))]

The view answers ``405`` to anything but ``POST``, ``413`` to a body over
``max_body`` bytes, ``401`` to a request whose signature, headers or
timestamp do not verify (herenow drops such a batch: a forged request is
not retried), ``400`` to a signed body that is not a herenow batch, and
``204`` once ``handler`` returned (or what ``handler`` returned, if it is
an ``HttpResponse``). An exception in ``handler`` is Django's ``500``,
which herenow retries later with the same events: handle idempotently,
by each event's ``id``. It is exempt from CSRF (the signature is the
credential).

The secret is ``secret=`` or ``settings.HERENOW["WEBHOOK_SECRET"]``, else
the environment's ``HERENOW_WEBHOOK_SECRET``; a list accepts any of its
secrets (while rotating).
"""

from __future__ import annotations

import logging
import os
from typing import Any, Callable, Optional, Sequence, Union, cast

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from ..errors import InvalidArgument
from ..webhooks import (
    DEFAULT_TOLERANCE,
    Secret,
    SecretLike,
    WebhookBatch,
    WebhookPayloadError,
    WebhookVerificationError,
    receive,
)
from . import conf

__all__ = ["webhook_view", "DEFAULT_MAX_BODY"]

log = logging.getLogger("herenow.django.webhooks")

#: Bytes of body accepted: herenow sends at most 256 KiB per request.
DEFAULT_MAX_BODY = 1024 * 1024

Handler = Callable[[WebhookBatch, HttpRequest], Optional[HttpResponse]]


def _problem(status: int, code: str, detail: str) -> HttpResponse:
    response = JsonResponse(
        {"title": code.replace("-", " "), "status": status, "detail": detail, "code": code},
        status=status,
    )
    response["Content-Type"] = "application/problem+json"
    return response


def _configured_secret() -> Union[SecretLike, Sequence[SecretLike]]:
    value = conf.setting("WEBHOOK_SECRET") or os.environ.get("HERENOW_WEBHOOK_SECRET")
    if not value:
        raise InvalidArgument(
            "no webhook secret: pass secret= or set HERENOW['WEBHOOK_SECRET'] "
            "(or $HERENOW_WEBHOOK_SECRET)"
        )
    return value


def webhook_view(
    handler: Handler,
    *,
    secret: Union[SecretLike, Sequence[SecretLike], None] = None,
    tolerance: float = DEFAULT_TOLERANCE,
    max_body: int = DEFAULT_MAX_BODY,
) -> Callable[[HttpRequest], HttpResponse]:
    """A view that verifies herenow's webhook requests and hands their
    events to ``handler(batch, request)``; see the module's documentation.

    A secret given here is decoded at once (a bad one fails at import,
    not on the first request); one from the settings on each request, so
    ``override_settings`` applies.
    """
    if max_body < 1:
        raise InvalidArgument("max_body must be >= 1")
    fixed = None
    if secret is not None:
        fixed = (
            [Secret.of(s) for s in secret]
            if not isinstance(secret, (str, bytes, Secret))
            else Secret.of(secret)
        )

    def view(request: HttpRequest) -> HttpResponse:
        if request.method != "POST":
            response = _problem(405, "method-not-allowed", "webhooks are POSTed")
            response["Allow"] = "POST"
            return response
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0
        if declared > max_body:
            return _problem(413, "body-too-large", f"the body is over {max_body} bytes")
        body = request.read(max_body + 1)
        if len(body) > max_body:
            return _problem(413, "body-too-large", f"the body is over {max_body} bytes")
        try:
            batch = receive(
                request.headers,
                body,
                fixed if fixed is not None else _configured_secret(),
                tolerance=tolerance,
            )
        except WebhookVerificationError as e:
            log.warning("herenow webhook refused: %s", e)
            return _problem(401, e.reason, str(e))
        except WebhookPayloadError as e:
            log.warning("herenow webhook not understood: %s", e)
            return _problem(400, "bad-payload", str(e))
        answer: Any = handler(batch, request)
        if isinstance(answer, HttpResponse):
            return answer
        return HttpResponse(status=204)

    view.__name__ = getattr(handler, "__name__", "herenow_webhook")
    view.__doc__ = handler.__doc__
    # The signature is the credential: no CSRF token comes with a webhook.
    return cast(Callable[[HttpRequest], HttpResponse], csrf_exempt(view))
