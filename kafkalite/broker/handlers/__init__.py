"""One module per Kafka API; each registers its handler and version range with @api."""
