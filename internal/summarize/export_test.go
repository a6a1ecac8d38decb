package summarize

// HoldsPath exports holdsPath to the package's external tests.
var HoldsPath = holdsPath
