"""ApiVersions (key 18): the served table, computed from the handler registry.

KIP-511: v3 names the client software; a valid name and version are kept on the connection
(``KafkaConnection.client_software``) and logged at debug. A version above ours never reaches
this handler: the dispatcher answers it with the v0-format UNSUPPORTED_VERSION listing.
"""
from __future__ import annotations

import logging
import re
from kafkalite.broker.services import RequestContext
from kafkalite.broker.registry import advertised, api
from kafkalite.errors import ErrorCode
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import ApiVersionsRequest, ApiVersionsResponse, ApiVersionsResponseApiVersion

log = logging.getLogger(__name__)

_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


@api(ApiKey.API_VERSIONS, 0, 3)
def handle_api_versions(ctx: RequestContext, req: ApiVersionsRequest) -> ApiVersionsResponse:
    keys: list[ApiVersionsResponseApiVersion] = [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in advertised()]
    error = ErrorCode.NONE
    if ctx.api_version >= 3:
        name, version = req["client_software_name"], req["client_software_version"]
        if not (_SOFTWARE.match(name or "") and _SOFTWARE.match(version or "")):
            error = ErrorCode.INVALID_REQUEST
        else:
            # KIP-511: kept per connection (Kafka tags its connection metrics with it)
            ctx.conn.client_software = (name, version)
            log.debug("connection %s (client id %r) is %s %s", ctx.conn.peer, ctx.client_id, name, version)
    return {"error_code": int(error), "api_keys": keys, "throttle_time_ms": 0}
