"""The ksqlDB role: ksqlDB's statements run as Spark Structured Streaming queries over kafkalite
topics (docs/sql.md). A client of the brokers (kafkalite.client) and of Spark, never inside a
broker: parser -> metastore -> engine (command topic, Spark queries) -> REST layer."""
