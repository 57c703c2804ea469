"""The environment variables of the CLI that are not daemon settings: the admin client's TLS material and
`check`'s process count. Kept in a light module of their own so the CLI defines its options without
importing the settings, and the settings' check for unknown `BKAUDIT_*` variables accepts them (the chart
sets the admin client's in the pod, where the daemon reads the same environment)."""

ENV_CLI_TLS_CA = "BKAUDIT_CLI_TLS_CA"
ENV_CLI_TLS_CERT = "BKAUDIT_CLI_TLS_CERT"
ENV_CLI_TLS_KEY = "BKAUDIT_CLI_TLS_KEY"
ENV_CLI_TLS_SERVER_NAME = "BKAUDIT_CLI_TLS_SERVER_NAME"
ENV_CHECK_PROCESSES = "BKAUDIT_CHECK_PROCESSES"  # `bk-auditor check --processes`
CLI_VARIABLES = (ENV_CLI_TLS_CA, ENV_CLI_TLS_CERT, ENV_CLI_TLS_KEY, ENV_CLI_TLS_SERVER_NAME, ENV_CHECK_PROCESSES)
