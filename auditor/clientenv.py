"""The environment variables of the CLI's admin client that are not daemon settings: the admin API's TLS
material. Kept in a light module of their own so the CLI defines its options without importing the
settings, and the settings' check for unknown `BKAUDIT_*` variables accepts them (the chart sets them in
the pod, where the daemon reads the same environment)."""

ENV_CLI_TLS_CA = "BKAUDIT_CLI_TLS_CA"
ENV_CLI_TLS_CERT = "BKAUDIT_CLI_TLS_CERT"
ENV_CLI_TLS_KEY = "BKAUDIT_CLI_TLS_KEY"
ENV_CLI_TLS_SERVER_NAME = "BKAUDIT_CLI_TLS_SERVER_NAME"
ADMIN_CLIENT_VARIABLES = (ENV_CLI_TLS_CA, ENV_CLI_TLS_CERT, ENV_CLI_TLS_KEY, ENV_CLI_TLS_SERVER_NAME)
