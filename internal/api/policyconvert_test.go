package api

import (
	"reflect"
	"testing"

	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/store"
)

// TestPolicyRoundTrip: every policy field survives proto and the store,
// keep_human_tokens included (a field left out of either is lost silently).
func TestPolicyRoundTrip(t *testing.T) {
	f, i, i64, b, str := 0.6, 7, int64(1234), true, "extractive"
	o := compaction.Overrides{WarningThreshold: &f, CriticalThreshold: &f, EmergencyThreshold: &f, Target: &f,
		KeepRecentTokens: &i64, KeepRecentMessages: &i, ProtectRecentToolResults: &i, AutoCompact: &b,
		ReservedOutputTokens: &i64, SummaryMaxTokens: &i, Summarizer: &str, CachePaybackCalls: &i, CacheTarget: &f,
		ExposeExpandTool: &b, KeepHumanTokens: &i64}
	v := reflect.ValueOf(o)
	for k := range v.NumField() {
		if v.Field(k).IsNil() {
			t.Fatalf("the test leaves %s unset", v.Type().Field(k).Name)
		}
	}
	if got := policyFromProto(overridesToProto(o)); !reflect.DeepEqual(got, o) {
		t.Errorf("through proto: %+v, want %+v", got, o)
	}
	text, err := store.EncodePolicy(o)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := store.DecodePolicy(text); err != nil || !reflect.DeepEqual(got, o) {
		t.Errorf("through the store: %+v, %v", got, err)
	}
	if p := policyToProto(compaction.Defaults(100_000)); p.GetKeepHumanTokens() != 85_000/4 {
		t.Errorf("resolved keep_human_tokens = %d", p.GetKeepHumanTokens())
	}
}
