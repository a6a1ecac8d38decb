package postgres

// MarkUnavailable is unavailable, for the external tests.
var MarkUnavailable = unavailable
