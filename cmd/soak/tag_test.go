package main

import "testing"

func TestTagOf(t *testing.T) {
	for text, want := range map[string]string{
		"«g3.c12.t0» fix the parser": "«g3.c12.t0»",
		"«g3.c12.t0»":                "«g3.c12.t0»",
		"fix «g3.c12.t0» the parser": "",
		"«unclosed":                  "",
		"":                           "",
	} {
		if got := tagOf(text); got != want {
			t.Errorf("tagOf(%q) = %q, want %q", text, got, want)
		}
	}
}
