package migrations_test

import (
	"crypto/sha256"
	"fmt"
	"os"
	"testing"
)

// TestReleasedMigrationsUnchanged: a released migration is never edited
// (a database that applied it does not run it again: an edit reaches only
// new databases, and the code that needs it fails on every upgraded one);
// a change goes in a new migration. The SHA-256 of each migration of the
// release that applied 00017 and 00018 (stop 37), and of 00019 (stop 38).
func TestReleasedMigrationsUnchanged(t *testing.T) {
	released := map[string]string{
		"postgres/00001_sessions.sql":                    "1222c00c65f4619f2b9e234f9227c9a1908362445704478e5ef83acba7f11e43",
		"postgres/00002_compactions.sql":                 "a7bbecf095b1d815b60c1884bb5500c35067170d5f2f0749181ab09c221867e1",
		"postgres/00003_calibration.sql":                 "4e01e1df9b492aa3135a733df9c3020f6cc494f6c75228dfb9f59c7c82aae80d",
		"postgres/00004_open_tool_calls.sql":             "2cfa64ed57a43f73e998ce37d1b4bfec612d91fdf83ac5bf96fc8795f5abba44",
		"postgres/00005_ledger.sql":                      "30aa372e7a3deccf0d3fe207dd1510e45526bb52990b23682fc47b5756cfcc0e",
		"postgres/00006_prepared_view_token.sql":         "77e374ba4eff8b5566804f3e9c58d78527bbe9250ca32ab2722bfff5abe46df2",
		"postgres/00007_message_counted_for.sql":         "7fe042a3d1d0d10f54afe0a3f5ed97032081eece0a5d6d73011266f553f563b7",
		"postgres/00008_compactions_by_round.sql":        "8d05a38569b7243de89bdd1417776ead9a8e9bb73611551891e0799fe526c3cb",
		"postgres/00009_active_bytes.sql":                "876e8681a4796924d011d5e9fd2ff69e050fb5b31eb4cd4a14207661b8751eb2",
		"postgres/00010_compaction_jobs.sql":             "386d641ff0052820c5806a2064574c67c0593141bcc3b94d928997d214da2d1d",
		"postgres/00011_history_index.sql":               "97367be215ee1bf2821329851fc9785de284bf6708bfc88b1e3ee35b9b2f06c6",
		"postgres/00012_quotas_and_view_generations.sql": "0b52815acdef4b0d9d435e8479366aa352cb5232e2c09f01606344867583d3bc",
		"postgres/00013_fork_shared_bodies.sql":          "ee2cca6b6326e6e43d19f5eca5bbb0cc05a76c24648ec3788dfe016098f070a2",
		"postgres/00014_tool_calls_by_id.sql":            "16592f9d73d81d9c3b5357f5a1d7213eba3c3b82a11acf966eb71b4048173239",
		"postgres/00017_summaries_by_digest.sql":         "20a8fafbbb3fc49a2f8860d8e7baf3e40ec0ec90e1cb7a7ed3f18d768e0acee1",
		"postgres/00018_tools_digest.sql":                "8ddbaaacf234d8b05fe1b515284ac6961ff061291c1736460ecdbefd64c3452e",
		"postgres/00019_summaries_order.sql":             "4e49253612c0e0b39cd2ee67b43fcee763a7a6bc6a8cfe9b0cc907c969b67462",
		"sqlite/00001_sessions.sql":                      "f34bbebe93d49ecd5da375dbaeabe519bfb778e689e038620961d77621bbd170",
		"sqlite/00002_compactions.sql":                   "5c7503b93d0b1869e273578288fe7c429b26709926fbc921dd8376a2242ffa35",
		"sqlite/00003_calibration.sql":                   "e293f00a3294d788fbb50eba4464b0a65c7a419405db6ad2fcb5993764935564",
		"sqlite/00004_open_tool_calls.sql":               "2cfa64ed57a43f73e998ce37d1b4bfec612d91fdf83ac5bf96fc8795f5abba44",
		"sqlite/00005_ledger.sql":                        "fcf24cfa940be98c87e1d90eee372806f164fa23544485e17dba6fce4273e205",
		"sqlite/00006_prepared_view_token.sql":           "abe6d27e393bb495b611c8cb967d958230f8474e2f1e7b717253aac5d7d97a51",
		"sqlite/00007_message_counted_for.sql":           "7fe042a3d1d0d10f54afe0a3f5ed97032081eece0a5d6d73011266f553f563b7",
		"sqlite/00008_compactions_by_round.sql":          "8d05a38569b7243de89bdd1417776ead9a8e9bb73611551891e0799fe526c3cb",
		"sqlite/00009_active_bytes.sql":                  "915d56023baba578b808072a8765e377ad1a0ad459535bf9b9cb2cc3cf3131bb",
		"sqlite/00010_compaction_jobs.sql":               "733f0069e67d49006d74cbfbae004eb9f7e74083cfe71996e660a304656235be",
		"sqlite/00011_history_index.sql":                 "d69cb500409b2706ddf9739a4c6ef828616fd50ec83ad5a36b00e3a3374adea9",
		"sqlite/00012_quotas_and_view_generations.sql":   "9f9139a3af9511218863eb5de08c0a8dddc3e75cca1ce794a98f547d45d1d920",
		"sqlite/00013_fork_shared_bodies.sql":            "ec533eeab4158627fcbb491c5a864ae34160aa1768768747a665b587ebf969ac",
		"sqlite/00014_tool_calls_by_id.sql":              "16592f9d73d81d9c3b5357f5a1d7213eba3c3b82a11acf966eb71b4048173239",
		"sqlite/00015_append_statements.sql":             "f399cb712a70cecb8750b4492f1affeaca01c8e8e5d891febd77dd2fe78c95c5",
		"sqlite/00016_open_calls.sql":                    "c54fa0e87abdae2993f8282c52f7c70e416b8718d035c822330580c70bad9ca0",
		"sqlite/00017_summaries_by_digest.sql":           "20a8fafbbb3fc49a2f8860d8e7baf3e40ec0ec90e1cb7a7ed3f18d768e0acee1",
		"sqlite/00019_summaries_order.sql":               "10e2f628622315201a3af4a2eecfdcdacf61a1212e6da4947bd796f9a3d35f46",
	}
	for name, want := range released {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("released migration %s: %v", name, err)
			continue
		}
		if got := fmt.Sprintf("%x", sha256.Sum256(b)); got != want {
			t.Errorf("released migration %s was edited (SHA-256 %s, released %s): put the change in a new migration", name, got, want)
		}
	}
}
