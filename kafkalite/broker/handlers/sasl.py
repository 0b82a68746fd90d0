"""SaslHandshake (17) and SaslAuthenticate (36) once a connection is past authentication.

On SASL listeners the exchange itself runs in ``kafkalite.net.sasl`` before the dispatcher sees
any request; these entries make ApiVersions advertise both APIs (clients check them before
authenticating) and answer them where Kafka's KafkaApis does: on a connection that is not (or
no longer) in the SASL exchange, with ILLEGAL_SASL_STATE.
"""
from __future__ import annotations

from kafkalite.broker.registry import api
from kafkalite.broker.services import RequestContext
from kafkalite.errors import ErrorCode
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import (SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
                                               SaslHandshakeResponse)


@api(ApiKey.SASL_HANDSHAKE, 0, 1)
def handle_sasl_handshake(ctx: RequestContext, req: SaslHandshakeRequest) -> SaslHandshakeResponse:
    return {"error_code": int(ErrorCode.ILLEGAL_SASL_STATE), "mechanisms": []}


@api(ApiKey.SASL_AUTHENTICATE, 0, 2)
def handle_sasl_authenticate(ctx: RequestContext, req: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    return {"error_code": int(ErrorCode.ILLEGAL_SASL_STATE),
            "error_message": "SaslAuthenticate request received after successful authentication",
            "auth_bytes": b"", "session_lifetime_ms": 0}
