"""Kafka's security model: principals, SASL (PLAIN, SCRAM), TLS, ACL authorization."""
