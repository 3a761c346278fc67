"""GLUE by name: `python train.py finetune --glue GLUE_DIR`, its nine tasks as the papers run them.

    tasks.py   GLUE's tasks as files: each one's folder, columns, labels and metrics; its training
               text as a pretraining corpus; the test predictions GLUE's server takes back
    sweep.py   --glue: every task per seed (each run one fine-tuning job, job.py), the lr chosen
               where the recipe leaves it open, the two averages, glue.json
    twin.py    --against-untrained: a checkpoint's untrained twin, and what pretraining gains over it

Machinery: the tasks are sentence tasks (kinds/sentences.py); what is GLUE's by name is here.
"""
