// Package ui is the browser dashboard: static assets embedded in the binary
// and served under a path prefix (/ui/ on the gRPC port). The page calls the
// same API as every client (the Connect protocol, through the generated
// TypeScript client bundled into static/app.js), so authentication, tenancy
// and limits are the server's; this package serves files only and reads no
// session data itself.
//
// The sources are in web/ (TypeScript, bundled with esbuild by `make ui`);
// the built bundle in static/ is committed so that running the server needs
// no Node.js.
package ui

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var assets embed.FS

// Handler serves the dashboard under prefix (e.g. "/ui/"). Unknown paths
// below the prefix get the page itself (its routes live in the URL
// fragment), so a reload on any dashboard URL works.
func Handler(prefix string) http.Handler {
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	static, err := fs.Sub(assets, "static")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	files := http.FileServerFS(static)
	return http.StripPrefix(prefix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		// Everything the page needs comes from this origin: no CDN, no
		// inline script, no framing by other sites.
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		name := path.Clean("/" + r.URL.Path)[1:]
		if name == "" {
			name = "index.html"
		}
		if _, err := fs.Stat(static, name); err != nil {
			name = "index.html"
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + name
		if name == "index.html" {
			// FileServer redirects /index.html to ./; serve it directly.
			f, err := static.Open("index.html")
			if err != nil {
				http.Error(w, "dashboard not built", http.StatusInternalServerError)
				return
			}
			defer f.Close()
			st, _ := f.Stat()
			h.Set("Content-Type", "text/html; charset=utf-8")
			http.ServeContent(w, r2, "index.html", st.ModTime(), f.(readSeeker))
			return
		}
		files.ServeHTTP(w, r2)
	}))
}

type readSeeker interface {
	Read([]byte) (int, error)
	Seek(int64, int) (int64, error)
}
