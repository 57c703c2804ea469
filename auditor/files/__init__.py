"""Files from outside, read safely: TLS material (`tls`: PEM, PKCS12 and JKS stores as an `ssl.SSLContext`)
and YAML with bounded nesting (`safeyaml`). Below the adapters and the settings, which both read them."""
