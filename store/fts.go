package store

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// Full-text search.
//
// SQLite's unicode61 tokenizer splits on spaces and punctuation, which suits English and
// Korean-with-spaces but leaves a run of Chinese or Japanese as one long token: 天气 would not
// match inside 今天天气很好. The trigram tokenizer (SQLite ≥ 3.34; Debian 12 has 3.40) matches
// substrings but returns nothing for queries under three characters, and most Chinese words are
// two. So the FTS copy of each turn's text puts a zero-width space (a separator to unicode61)
// around every CJK character, making each one a token; a query term is quoted as a phrase after
// the same treatment, so 天气 becomes the phrase "天 气" and matches adjacent characters, while
// English keeps whole-word matching with diacritics folded. Snippets come back from the FTS
// copy and have the zero-width spaces removed.

const (
	zwsp    = '\u200b'
	markOn  = '\ue000' // highlight markers inside snippet(); stripped from indexed text
	markOff = '\ue001'
)

// isCJK reports whether r is written without spaces between words in the languages Parley
// speaks (Chinese, Cantonese, Japanese; Hangul too, since Korean attaches particles to words).
func isCJK(r rune) bool {
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r) ||
		unicode.Is(unicode.Bopomofo, r) || r == 'ー' // katakana prolonged sound mark is Common
}

// ftsText is the SQL function parley_fts_text: the text as it is indexed.
func ftsText(s string) string {
	s = strings.ToValidUTF8(s, "\ufffd")
	var b strings.Builder
	b.Grow(len(s) + len(s)/2)
	prevCJK := false
	for _, r := range s {
		switch {
		case r == markOn || r == markOff || r == zwsp:
			r = ' '
		case r == 0:
			r = ' '
		}
		cjk := isCJK(r)
		if cjk || prevCJK {
			b.WriteRune(zwsp)
		}
		b.WriteRune(r)
		prevCJK = cjk
	}
	return b.String()
}

// isTokenRune approximates unicode61's token characters (letters, numbers, private use, and
// marks, which remove_diacritics folds away).
func isTokenRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Co, r) || unicode.IsMark(r)
}

// FTSQuery turns free text typed by a user into an FTS5 MATCH expression that can never be a
// syntax error: each whitespace-separated term becomes a quoted phrase (so AND, OR, NOT, NEAR,
// column filters, parentheses and quotes are literal), terms are ANDed, and a term ending in *
// is a prefix search. It returns ErrEmptyQuery when no term has a letter or digit.
func FTSQuery(q string) (string, error) {
	q = strings.ToValidUTF8(q, " ")
	fields := strings.FieldsFunc(q, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r) || r == zwsp || r == markOn || r == markOff
	})
	var terms []string
	for _, f := range fields {
		prefix := strings.HasSuffix(f, "*")
		f = strings.TrimRight(f, "*")
		if strings.IndexFunc(f, isTokenRune) < 0 {
			continue
		}
		seg := strings.TrimFunc(ftsText(f), func(r rune) bool { return r == zwsp })
		t := `"` + strings.ReplaceAll(seg, `"`, `""`) + `"`
		if prefix {
			t += "*"
		}
		terms = append(terms, t)
	}
	if len(terms) == 0 {
		return "", ErrEmptyQuery
	}
	return strings.Join(terms, " "), nil
}

// Hit is one search result.
type Hit struct {
	TurnID         int64
	ConversationID int64
	Title          string // the conversation's title
	Role           Role
	Created        time.Time
	// Snippet is an excerpt of the turn's text around the match ("…" where cut), and
	// Highlights the byte ranges [start, end) of Snippet that matched.
	Snippet    string
	Highlights [][2]int
	Rank       float64 // bm25 (lower is better) with SearchRelevance; 0 otherwise
}

// SearchOrder orders search results.
type SearchOrder int

// Orders. Newest first costs the same however many turns match; by relevance (bm25) costs in
// proportion to the number of matches (about 1 ms per 1,000 on the reference machine).
const (
	SearchNewest SearchOrder = iota
	SearchRelevance
)

// SearchOptions narrow a search.
type SearchOptions struct {
	Limit          int   // default 20
	Offset         int   //
	ConversationID int64 // 0 = all conversations
	Order          SearchOrder
}

// Search finds turns whose text matches the query (see FTSQuery), newest first unless
// opt.Order asks for relevance.
func (s *Store) Search(ctx context.Context, query string, opt SearchOptions) ([]Hit, error) {
	m, err := FTSQuery(query)
	if err != nil {
		return nil, fmt.Errorf("store: search %q: %w", query, err)
	}
	if opt.Limit <= 0 {
		opt.Limit = 20
	}
	if opt.Offset < 0 {
		opt.Offset = 0
	}
	// ORDER BY rowid DESC / rank with LIMIT is handed to FTS5, which streams rows in that
	// order, so snippet() runs for the returned page only.
	order, rank := `turns_fts.rowid DESC`, `0.0`
	if opt.Order == SearchRelevance {
		order, rank = `turns_fts.rank`, `turns_fts.rank` // rank alone: FTS5 sorts it itself
	}
	sqlq := `SELECT t.id, t.conversation_id, c.title, t.role, t.created_at,
	                snippet(turns_fts, 0, char(57344), char(57345), '…', 24), ` + rank + `
	           FROM turns_fts
	           JOIN turns t ON t.id = turns_fts.rowid
	           JOIN conversations c ON c.id = t.conversation_id
	          WHERE turns_fts MATCH ?1`
	if opt.ConversationID != 0 {
		sqlq += ` AND t.conversation_id = ?4`
	}
	sqlq += ` ORDER BY ` + order + ` LIMIT ?2 OFFSET ?3`
	args := []any{m, opt.Limit, opt.Offset, opt.ConversationID}
	rows, err := s.r.QueryContext(ctx, sqlq, args...)
	if err != nil {
		return nil, s.wrap("search", err)
	}
	defer rows.Close()
	var hits []Hit
	for rows.Next() {
		var h Hit
		var created int64
		var raw string
		if err := rows.Scan(&h.TurnID, &h.ConversationID, &h.Title, &h.Role, &created, &raw, &h.Rank); err != nil {
			return nil, s.wrap("search", err)
		}
		h.Created = fromMS(created)
		h.Snippet, h.Highlights = cleanSnippet(raw)
		hits = append(hits, h)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("search", err)
	}
	return hits, nil
}

// cleanSnippet removes the zero-width spaces of the indexed copy and turns the highlight
// markers into byte ranges, merging adjacent ones.
func cleanSnippet(raw string) (string, [][2]int) {
	var b strings.Builder
	var hl [][2]int
	start := -1
	for _, r := range raw {
		switch r {
		case zwsp:
		case markOn:
			if n := len(hl); n > 0 && hl[n-1][1] == b.Len() {
				start = hl[n-1][0] // adjacent to the previous highlight: extend it
				hl = hl[:n-1]
			} else {
				start = b.Len()
			}
		case markOff:
			if start >= 0 {
				hl = append(hl, [2]int{start, b.Len()})
				start = -1
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String(), hl
}

// Highlight renders a snippet with its highlights wrapped in on/off (e.g. "[" and "]", or
// terminal escapes).
func Highlight(snippet string, hl [][2]int, on, off string) string {
	var b strings.Builder
	last := 0
	for _, h := range hl {
		if h[0] < last || h[1] > len(snippet) || h[0] > h[1] {
			continue
		}
		b.WriteString(snippet[last:h[0]])
		b.WriteString(on)
		b.WriteString(snippet[h[0]:h[1]])
		b.WriteString(off)
		last = h[1]
	}
	b.WriteString(snippet[last:])
	return b.String()
}
