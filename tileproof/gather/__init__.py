"""Reading the repository for the judge: the one place that gathers the decision's inputs and the audit's files."""
