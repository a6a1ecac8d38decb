package clients

import "net/http"

func (p *Provider) responses(w http.ResponseWriter, r *http.Request) { p.unknown(w, r) }
func (p *Provider) chat(w http.ResponseWriter, r *http.Request)      { p.unknown(w, r) }
