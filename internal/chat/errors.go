package chat

import (
	"fmt"
	"strings"
)

// Violation is one problem with one field of a request, named by its path
// in the request (e.g. "messages[3].parts[0].tool_result.tool_call_id").
type Violation struct {
	Field       string
	Description string
}

// InvalidError is bad input: one or more field violations. The API edge maps
// it to InvalidArgument with field details.
type InvalidError struct {
	Violations []Violation
}

func (e *InvalidError) Error() string {
	parts := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		parts[i] = v.Field + ": " + v.Description
	}
	return "invalid request: " + strings.Join(parts, "; ")
}

// Invalid returns an InvalidError with one violation.
func Invalid(field, format string, args ...any) *InvalidError {
	return &InvalidError{Violations: []Violation{{Field: field, Description: fmt.Sprintf(format, args...)}}}
}
