package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// JobStatus is the state of a training job.
type JobStatus string

// Job states.
const (
	JobQueued    JobStatus = "queued"
	JobRunning   JobStatus = "running"
	JobDone      JobStatus = "done"
	JobFailed    JobStatus = "failed"
	JobCancelled JobStatus = "cancelled"
)

func (s JobStatus) valid() bool {
	switch s {
	case JobQueued, JobRunning, JobDone, JobFailed, JobCancelled:
		return true
	}
	return false
}

// Finished reports whether the job reached a final state.
func (s JobStatus) Finished() bool { return s == JobDone || s == JobFailed || s == JobCancelled }

// Job is a training job (voice clone, fine-tune…) and its progress.
type Job struct {
	ID       int64
	Kind     string
	Status   JobStatus
	Config   json.RawMessage // as given to CreateJob
	Progress json.RawMessage // last value given to UpdateJobProgress; {} at first
	Error    string          // why it failed
	Created  time.Time
	Updated  time.Time
	Started  time.Time // zero until running
	Finished time.Time // zero until done, failed or cancelled
}

// MaxJobJSON is the largest config or progress document accepted, in bytes.
const MaxJobJSON = 1 << 20

func checkJSON(what string, b json.RawMessage) (string, error) {
	if len(b) == 0 {
		return "{}", nil
	}
	if len(b) > MaxJobJSON {
		return "", fmt.Errorf("job %s of %d bytes exceeds %d: %w", what, len(b), MaxJobJSON, ErrInvalid)
	}
	if !json.Valid(b) {
		return "", fmt.Errorf("job %s is not valid JSON: %w", what, ErrInvalid)
	}
	return string(b), nil
}

// CreateJob records a queued job.
func (s *Store) CreateJob(ctx context.Context, kind string, config json.RawMessage) (Job, error) {
	if kind == "" {
		return Job{}, fmt.Errorf("store: create job: empty kind: %w", ErrInvalid)
	}
	cfg, err := checkJSON("config", config)
	if err != nil {
		return Job{}, fmt.Errorf("store: create %s job: %w", kind, err)
	}
	now := time.Now().Truncate(time.Millisecond)
	j := Job{Kind: kind, Status: JobQueued, Config: json.RawMessage(cfg), Progress: json.RawMessage("{}"), Created: now, Updated: now}
	err = s.write(ctx, "create job", func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `INSERT INTO jobs(kind, status, config, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?) RETURNING id`, kind, string(JobQueued), cfg, now.UnixMilli(), now.UnixMilli()).Scan(&j.ID)
	})
	return j, err
}

// UpdateJobProgress replaces a job's progress document.
func (s *Store) UpdateJobProgress(ctx context.Context, id int64, progress json.RawMessage) error {
	p, err := checkJSON("progress", progress)
	if err != nil {
		return fmt.Errorf("store: job %d: %w", id, err)
	}
	return s.write(ctx, fmt.Sprintf("update job %d", id), func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE jobs SET progress = ?, updated_at = ? WHERE id = ?`, p, time.Now().UnixMilli(), id)
		return mustAffect(res, err, "job", id)
	})
}

// SetJobStatus moves a job to a new state; errMsg is kept for JobFailed. Start and finish
// times are recorded on entering running and a final state.
func (s *Store) SetJobStatus(ctx context.Context, id int64, status JobStatus, errMsg string) error {
	if !status.valid() {
		return fmt.Errorf("store: job %d: status %q: %w", id, status, ErrInvalid)
	}
	now := time.Now().UnixMilli()
	return s.write(ctx, fmt.Sprintf("set job %d status", id), func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE jobs SET status = ?1, error = ?2, updated_at = ?3,
			started_at = CASE WHEN ?1 = 'running' AND started_at IS NULL THEN ?3 ELSE started_at END,
			finished_at = CASE WHEN ?1 IN ('done', 'failed', 'cancelled') THEN ?3 ELSE NULL END
			WHERE id = ?4`, string(status), errMsg, now, id)
		return mustAffect(res, err, "job", id)
	})
}

const jobCols = `id, kind, status, config, progress, error, created_at, updated_at, started_at, finished_at`

func scanJob(sc interface{ Scan(...any) error }) (Job, error) {
	var j Job
	var cfg, prog string
	var cr, up int64
	var st, fin sql.NullInt64
	err := sc.Scan(&j.ID, &j.Kind, &j.Status, &cfg, &prog, &j.Error, &cr, &up, &st, &fin)
	j.Config, j.Progress = json.RawMessage(cfg), json.RawMessage(prog)
	j.Created, j.Updated, j.Started, j.Finished = fromMS(cr), fromMS(up), fromNullMS(st), fromNullMS(fin)
	return j, err
}

// Job returns one job, or an error wrapping ErrNotFound.
func (s *Store) Job(ctx context.Context, id int64) (Job, error) {
	j, err := scanJob(s.r.QueryRowContext(ctx, `SELECT `+jobCols+` FROM jobs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return j, fmt.Errorf("store: job %d: %w", id, ErrNotFound)
	}
	return j, s.wrap(fmt.Sprintf("job %d", id), err)
}

// Jobs lists jobs, newest first; kind "" lists every kind.
func (s *Store) Jobs(ctx context.Context, kind string, opt ListOptions) ([]Job, error) {
	if opt.Limit <= 0 {
		opt.Limit = 50
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+jobCols+` FROM jobs WHERE ?1 = '' OR kind = ?1
		ORDER BY created_at DESC, id DESC LIMIT ?2 OFFSET ?3`, kind, opt.Limit, max(opt.Offset, 0))
	if err != nil {
		return nil, s.wrap("list jobs", err)
	}
	defer rows.Close()
	var out []Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, s.wrap("list jobs", err)
		}
		out = append(out, j)
	}
	return out, s.wrap("list jobs", rows.Err())
}
