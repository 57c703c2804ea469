"""A file for `spark-submit` (which runs a .py file, not a module):

    spark-submit --master yarn ... "$(python -c 'import auditor.spark.submit as m; print(m.__file__)')" \
        --metadata-service-uri zk+hierarchical://zk:2181/ledgers --output hdfs:///audits/today
"""

import os
import sys

# Run as a file, this directory is sys.path[0]; its module names (plan, output, ...) must not shadow others.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]

from auditor.spark.sweep import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
