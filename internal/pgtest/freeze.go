package pgtest

import "testing"

// Freezable puts a proxy between a client and the database of url, as
// RoundTrips does, and returns the URL to give the client and freeze:
// once called, the server's answers stop reaching the client (its
// statements still reach the server), as a network that went silent; the
// client's reads wait until their deadline, or until the test ends and
// the proxy closes (Faulty's Silence).
func Freezable(t testing.TB, url string) (string, func()) {
	t.Helper()
	l := Faulty(t, url)
	return l.URL, l.Silence
}
