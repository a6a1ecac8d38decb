package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// TestStrangersWithTheSameOpening (issue 29, acceptance): conversations
// with the same opening — the same system prompt, first message and first
// reply, then each its own words — sent 8 at a time, with no session
// header. None is refused; none sees another's words upstream or another's
// session id in a header; each ends in a session of its own; and none waits
// for another conversation's upstream call: the first upstream call is
// held until every other conversation has finished (with the opening's
// session shared, they all queued behind it and this test timed out).
//
// 200 conversations by default; CONTEXTD_TEST_STRANGERS=1000 runs the
// issue's 1,000.
func TestStrangersWithTheSameOpening(t *testing.T) {
	n := 200
	if v, err := strconv.Atoi(os.Getenv("CONTEXTD_TEST_STRANGERS")); err == nil && v > 0 {
		n = v
	}
	bothStores(t, func(t *testing.T, s *server) {
		held, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		s.fake.Set(func(f *gatewaytest.Fake) {
			f.Before = func(string) {
				first := false
				once.Do(func() { first = true })
				if first {
					close(held)
					select {
					case <-release:
					case <-time.After(2 * time.Minute):
					}
				}
			}
		})
		type seen struct {
			ids  []string
			fail string
		}
		results := make([]seen, n)
		post := func(i int, msgs []any) (*http.Response, []byte, error) {
			b, _ := json.Marshal(map[string]any{"model": "gpt-4o", "messages": msgs})
			req, _ := http.NewRequest(http.MethodPost, s.url("/v1/chat/completions"), bytes.NewReader(b))
			req.Header.Set("Authorization", "Bearer sk-test")
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return nil, nil, err
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			return resp, body, err
		}
		converse := func(i int) {
			r := &results[i]
			msgs := []any{map[string]any{"role": "system", "content": "You are a coding agent."},
				map[string]any{"role": "user", "content": "Fix the failing test."}}
			for turn := range 3 {
				resp, body, err := post(i, msgs)
				if err != nil || resp.StatusCode != http.StatusOK {
					r.fail = fmt.Sprintf("turn %d: %v %d %s", turn, err, statusOf(resp), body)
					return
				}
				if id := resp.Header.Get("X-Contextd-Session"); id != "" {
					r.ids = append(r.ids, id)
				}
				var out struct {
					Choices []struct {
						Message map[string]any `json:"message"`
					} `json:"choices"`
				}
				if json.Unmarshal(body, &out) != nil || len(out.Choices) == 0 {
					r.fail = fmt.Sprintf("turn %d: answer %s", turn, body)
					return
				}
				msgs = append(msgs, out.Choices[0].Message, map[string]any{"role": "user", "content": words(i, turn)})
			}
		}
		// Conversation 0 starts first; its first call is held.
		zero := make(chan struct{})
		go func() { converse(0); close(zero) }()
		select {
		case <-held:
		case <-zero:
			t.Fatalf("the first conversation ended before its call reached the provider: %s", results[0].fail)
		}
		work := make(chan int)
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					converse(i)
				}
			}()
		}
		finished := make(chan struct{})
		go func() {
			for i := 1; i < n; i++ {
				work <- i
			}
			close(work)
			wg.Wait()
			close(finished)
		}()
		select {
		case <-finished:
		case <-time.After(90 * time.Second):
			close(release)
			t.Fatal("the conversations did not finish while one opening call was held: some waited for a stranger's upstream call")
		}
		close(release)
		owner := map[string]int{}
		for i := 1; i < n; i++ {
			if results[i].fail != "" {
				t.Fatalf("conversation %d refused: %s", i, results[i].fail)
			}
			for _, id := range results[i].ids {
				if o, ok := owner[id]; ok && o != i {
					t.Fatalf("conversations %d and %d were both told session %s", o, i, id)
				}
				owner[id] = i
			}
		}
		// No upstream request carries two conversations' words.
		for _, req := range s.fake.Requests() {
			whose := -1
			for _, m := range strings.Split(string(req.Raw), "conversation ")[1:] {
				k, _, _ := strings.Cut(m, ",")
				if c, err := strconv.Atoi(k); err == nil {
					if whose >= 0 && c != whose {
						t.Fatalf("an upstream request carries conversations %d and %d", whose, c)
					}
					whose = c
				}
			}
		}
		// Each conversation's whole history is in a session of its own.
		var list struct {
			Sessions []struct {
				ID string `json:"id"`
			} `json:"sessions"`
			NextPageToken string `json:"nextPageToken"`
		}
		home := map[int]string{}
		token := ""
		for {
			list.NextPageToken = ""
			s.rpc("ListSessions", map[string]any{"pageSize": 500, "pageToken": token}, &list)
			for _, sess := range list.Sessions {
				log := strings.Join(s.logOf(sess.ID), "\n")
				whose := -1
				for i := range n {
					if strings.Contains(log, words(i, 0)) {
						if whose >= 0 {
							t.Fatalf("session %s holds conversations %d and %d", sess.ID, whose, i)
						}
						whose = i
					}
				}
				if whose >= 0 && strings.Contains(log, words(whose, 1)) {
					if home[whose] != "" {
						t.Fatalf("conversation %d's history is in sessions %s and %s", whose, home[whose], sess.ID)
					}
					home[whose] = sess.ID
				}
			}
			if token = list.NextPageToken; token == "" {
				break
			}
		}
		for i := 1; i < n; i++ {
			if home[i] == "" {
				t.Fatalf("conversation %d's history is in no session", i)
			}
		}
	})
}

func words(i, turn int) string {
	return fmt.Sprintf("conversation %d, turn %d: my own words", i, turn)
}

func statusOf(resp *http.Response) int {
	if resp == nil {
		return 0
	}
	return resp.StatusCode
}
