"""The kit's one home per API: route, headers, request builders and the one stream fold."""
