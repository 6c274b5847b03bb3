"""The shared kernel below every app: money, fields, errors, pagination, jobs, outbound HTTP,
secrets at rest and the dashboard's display helpers. It imports no app and not config."""
