package summarize

// HoldsPath exports holdsPath to the package's external tests.
var HoldsPath = holdsPath

// HeldPaths exports heldPaths to the package's external tests.
var HeldPaths = heldPaths
