package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The 100k-turn database is built once per test binary run, in a temporary directory removed
// by TestMain.
var bench100k struct {
	once sync.Once
	dir  string
	path string
	took time.Duration
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bench100k.dir != "" {
		os.RemoveAll(bench100k.dir)
	}
	os.Exit(code)
}

var (
	enWords = strings.Fields(`what is the weather like today tomorrow in paris london set a timer for ten minutes
		remind me to call mum play some music how far is the moon tell me a joke please turn up volume
		what time is it now convert five miles to kilometres who wrote hamlet lovely sunny rain cold warm
		coffee tea dinner meeting train station airport flight holiday birthday garden cat dog`)
	zhWords = strings.Fields(`今天 明天 天气 怎么样 北京 上海 下雨 晴天 温度 设置 定时器 分钟 提醒 我 给 妈妈
		打电话 播放 音乐 月亮 多远 讲 笑话 现在 几点 公里 英里 咖啡 晚饭 会议 火车站 机场 生日 花园 猫 狗`)
)

func benchText(r *rand.Rand) string {
	words, sep := enWords, " "
	if r.IntN(2) == 0 {
		words, sep = zhWords, ""
	}
	n := 4 + r.IntN(16)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = words[r.IntN(len(words))]
	}
	return strings.Join(parts, sep)
}

// build100k returns the path of a database with 1,000 conversations of 100 turns each, half
// English, half Chinese.
func build100k(b *testing.B) string {
	bench100k.once.Do(func() {
		bench100k.dir, bench100k.err = os.MkdirTemp("", "parley-store-bench-")
		if bench100k.err != nil {
			return
		}
		bench100k.path = filepath.Join(bench100k.dir, "100k.db")
		s, err := OpenWith(bench100k.path, Options{SyncNormal: true})
		if err != nil {
			bench100k.err = err
			return
		}
		defer s.Close()
		ctx := context.Background()
		r := rand.New(rand.NewPCG(1, 2))
		start := time.Now()
		for c := 0; c < 1000; c++ {
			conv, err := s.CreateConversation(ctx, fmt.Sprintf("bench %d", c))
			if err != nil {
				bench100k.err = err
				return
			}
			ts := make([]*Turn, 100)
			for i := range ts {
				role := RoleUser
				if i%2 == 1 {
					role = RoleAssistant
				}
				ts[i] = &Turn{ConversationID: conv.ID, Role: role, Text: benchText(r), Language: "en"}
			}
			if err := s.AddTurns(ctx, ts...); err != nil {
				bench100k.err = err
				return
			}
		}
		bench100k.took = time.Since(start)
	})
	if bench100k.err != nil {
		b.Fatal(bench100k.err)
	}
	b.Logf("100k-turn database built in %v (%.0f turns/s in batches of 100)", bench100k.took.Round(time.Millisecond),
		100000/bench100k.took.Seconds())
	return bench100k.path
}

// perOp times n calls of fn.
func perOp(b *testing.B, n int, fn func() error) time.Duration {
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := fn(); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start) / time.Duration(n)
}

// BenchmarkAddTurn: one turn per transaction (what the turn loop does), durable
// (synchronous=FULL), into an empty database and into the 100k one. The baseline, measured in
// the same run on the same connection, is a bare INSERT of the same text into a table without
// indexes, FTS or triggers, also one per transaction.
func BenchmarkAddTurn(b *testing.B) {
	for _, size := range []string{"empty", "100k"} {
		b.Run(size, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "w.db")
			if size == "100k" {
				src := build100k(b)
				copyDB(b, src, path)
			}
			s, err := Open(path)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			c, err := s.CreateConversation(ctx, "bench")
			if err != nil {
				b.Fatal(err)
			}
			r := rand.New(rand.NewPCG(3, 4))
			text := benchText(r)
			if _, err := s.w.Exec(`CREATE TABLE bare(text TEXT)`); err != nil {
				b.Fatal(err)
			}
			base := perOp(b, 200, func() error {
				_, err := s.w.Exec(`INSERT INTO bare(text) VALUES (?)`, text)
				return err
			})
			for b.Loop() {
				if err := s.AddTurn(ctx, &Turn{ConversationID: c.ID, Role: RoleUser, Text: text}); err != nil {
					b.Fatal(err)
				}
			}
			op := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(1/op.Seconds(), "turns/s")
			b.ReportMetric(float64(op)/float64(base), "x-bare-insert")
		})
	}
}

// BenchmarkAddTurnsBatch: 100 turns per transaction (imports, the 100k build).
func BenchmarkAddTurnsBatch(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "w.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	c, _ := s.CreateConversation(ctx, "bench")
	r := rand.New(rand.NewPCG(5, 6))
	for b.Loop() {
		ts := make([]*Turn, 100)
		for i := range ts {
			ts[i] = &Turn{ConversationID: c.ID, Role: RoleUser, Text: benchText(r)}
		}
		if err := s.AddTurns(ctx, ts...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(100*float64(b.N)/b.Elapsed().Seconds(), "turns/s")
}

func copyDB(b *testing.B, src, dst string) {
	data, err := os.ReadFile(src)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o600); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSearch100k: full-text queries (top 20 by bm25, with snippets) over 100k turns. The
// baseline, measured in the same run, is the same word found with a LIKE '%word%' scan of the
// turns table (what search costs without the index).
func BenchmarkSearch100k(b *testing.B) {
	path := build100k(b)
	s, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for _, q := range []struct{ name, query string }{
		{"en-common", "weather"},
		{"en-two-words", "timer minutes"},
		{"en-prefix", "birth*"},
		{"zh-common", "天气"},
		{"zh-phrase", "火车站"},
		{"zh-rare-pair", "猫 狗"},
	} {
		b.Run(q.name, func(b *testing.B) {
			hits, err := s.Search(ctx, q.query, SearchOptions{})
			if err != nil || len(hits) == 0 {
				b.Fatalf("search %q: %d hits, %v", q.query, len(hits), err)
			}
			m, _ := FTSQuery(q.query)
			var matches int
			s.r.QueryRowContext(ctx, `SELECT count(*) FROM turns_fts WHERE turns_fts MATCH ?`, m).Scan(&matches)
			b.Logf("%q matches %d of 100k turns", q.query, matches)
			like := strings.TrimSuffix(strings.Fields(q.query)[0], "*")
			base := perOp(b, 3, func() error {
				var n int
				return s.r.QueryRowContext(ctx, `SELECT count(*) FROM turns WHERE text LIKE ?`, "%"+like+"%").Scan(&n)
			})
			for _, order := range []struct {
				name string
				o    SearchOrder
			}{{"newest", SearchNewest}, {"relevance", SearchRelevance}} {
				b.Run(order.name, func(b *testing.B) {
					for b.Loop() {
						if _, err := s.Search(ctx, q.query, SearchOptions{Order: order.o}); err != nil {
							b.Fatal(err)
						}
					}
					op := b.Elapsed() / time.Duration(b.N)
					b.ReportMetric(1/op.Seconds(), "searches/s")
					b.ReportMetric(float64(base)/float64(op), "x-faster-than-LIKE-scan")
				})
			}
		})
	}
}

// BenchmarkSearchWhileWriting100k: search rate with a writer adding a turn every millisecond.
func BenchmarkSearchWhileWriting100k(b *testing.B) {
	src := build100k(b)
	path := filepath.Join(b.TempDir(), "rw.db")
	copyDB(b, src, path)
	s, err := OpenWith(path, Options{SyncNormal: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	c, _ := s.CreateConversation(ctx, "w")
	var wg sync.WaitGroup
	var writes int
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(7, 8))
		for ctx.Err() == nil {
			if s.AddTurn(ctx, &Turn{ConversationID: c.ID, Role: RoleUser, Text: benchText(r)}) == nil {
				writes++
			}
			time.Sleep(time.Millisecond)
		}
	}()
	for b.Loop() {
		if _, err := s.Search(ctx, "天气", SearchOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	el := b.Elapsed()
	cancel()
	wg.Wait()
	b.ReportMetric(float64(b.N)/el.Seconds(), "searches/s")
	b.ReportMetric(float64(writes)/el.Seconds(), "writes/s")
}
