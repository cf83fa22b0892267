"""What a launched job runs, written once for every launcher that writes or starts one (each in a folder of its own
beside this one): the launcher keeps only what is its own, the script, the manifest, the cluster.

- `strategy`: which strategy a job runs and how it places its processes, by the strategy's class;
- `arguments`: the `cli.py fit` arguments after `--`, the strategy taken out of them, and the flags a launcher sets
  itself (the derived trainer flags, the resume flag) refused there; the job's size checked by the check the strategy
  names (`job_check`);
- `trainer_flags`: the trainer flags sized to the job's nodes and processes;
- `pipeline_fit`: whether a pipeline's stages fit the job's processes, the pipeline strategy's `job_check` (it comes
  with the strategy's files);
- `timeouts`: how long a job's processes wait for a lost peer;
- `fit_arguments`: the job's `cli.py fit` arguments parsed by the training CLI's own parser, building nothing, before
  the job is written.
"""
