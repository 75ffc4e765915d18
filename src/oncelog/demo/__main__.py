import sys

from oncelog.demo.spark_demo import main

sys.exit(main())
