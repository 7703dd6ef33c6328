"""Tags, run search and bulk cancel on Redis Cluster: there every index is per
queue (inside the queue's hash tag), and a listing merges the walks of all
queues page by page."""

from test_bulk import test_bulk_cancel_leaves_finished_runs_untouched  # noqa: F401
from test_run_search import (  # noqa: F401
    flows,
    test_a_child_run_inherits_its_parents_tags_and_may_add_its_own,
    test_every_filter_combination_pages_through_exactly_what_a_full_scan_finds,
    test_pages_of_a_tag_filter_are_newest_first_and_complete,
)
