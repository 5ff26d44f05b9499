; a policy, a block, an adapt rule and a list fold
[ (policy) (block) (rule) (list) ] @fold
